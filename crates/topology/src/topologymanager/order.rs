//! [`MaskOrder`]: how the merge ranks two candidate masks of equal standing (upstream
//! `compareNumaAffinityMasks`), shared by the merge and the searches over hint families.

use super::numa_info::NumaInfo;
use crate::NumaMask;

/// How two distinct candidate masks of equal standing compare (upstream
/// `compareNumaAffinityMasks`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum MaskOrder<'a> {
    /// Upstream `Narrowest`.
    Narrowest,
    /// Upstream `Closest` (prefer-closest-numa-nodes, not for single-numa-node).
    Closest(&'a NumaInfo),
}

impl MaskOrder<'_> {
    /// Whether `candidate` replaces `current`.
    pub(crate) fn candidate_wins(&self, current: NumaMask, candidate: NumaMask) -> bool {
        if candidate == current {
            return false;
        }
        let best = match self {
            MaskOrder::Narrowest => {
                if current.is_narrower_than(candidate) {
                    current
                } else {
                    candidate
                }
            }
            MaskOrder::Closest(info) => info.closest(current, candidate),
        };
        best != current
    }
}

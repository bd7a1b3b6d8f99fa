//! CPU assignment (upstream `cpu_assignment.go`): `takeByTopologyNUMAPacked` and
//! `takeByTopologyNUMADistributed`, decision for decision.
//!
//! - [`take_by_topology_numa_packed`]: whole NUMA nodes / sockets (the larger first), then
//!   whole uncore caches (when preferred), whole cores, then single threads, each level
//!   sorted by ascending free CPUs then id, exactly as upstream.
//! - [`take_by_topology_numa_distributed`]: spread evenly over the fewest NUMA nodes, with
//!   upstream's balance score (standard deviation rounded to 1/1000) and its tie-breaks;
//!   [`take_by_topology_numa_distributed_with`] adds v1.38's [`DistributedOptions`].
//!
//! Two upstream behaviours are reproduced on purpose because the conformance vectors record
//! them: upstream's `iterateCombinations` hands its callback slices that share a backing
//! array with later combinations (Go `append` aliasing), so a remembered "best" combination
//! of 4, 6, 7 or 8 NUMA nodes can have its tail overwritten by later candidates — see
//! [`combinations`]; v1.38 copies it (#141238), and so does
//! [`take_by_topology_numa_distributed_with`], which the static policy uses, while
//! [`take_by_topology_numa_distributed`] keeps the v1.32–v1.37 reading. And where upstream's distributed remainder loops never terminate (the
//! `TIMEOUT` vectors), corral's loops are bounded: a candidate subset whose simulation stops
//! making progress is skipped, and an allocation that stops making progress returns
//! [`TakeError::RemainderStuck`].
//!
//! The distributed algorithm's walk over NUMA combinations is exponential in the number of
//! nodes (issue #29: seconds to minutes on 32–64 nodes), so it draws on the decision's step
//! budget (`corral_topology::topologymanager::spend`) and, cut short, answers the best
//! combination it scored, or the first fitting one in upstream's walk order — see
//! [`take_by_topology_numa_distributed`]. The packed algorithm is polynomial (a pass per
//! level over sorted groups) and draws nothing.

mod accumulator;
pub(crate) mod combinations;
mod distributed;
mod error;
mod packed;

pub use distributed::{
    DistributedOptions, take_by_topology_numa_distributed, take_by_topology_numa_distributed_with,
};
pub use error::TakeError;
pub use packed::take_by_topology_numa_packed;

use std::fmt;
use std::str::FromStr;

/// Whether [`take_by_topology_numa_packed`] takes whole uncore (L3) caches before whole cores
/// (upstream `takeByTopologyNUMAPacked`'s `preferAlignByUncoreCache`, set by the static
/// policy's `prefer-align-cpus-by-uncorecache` option).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum UncoreCacheAlignment {
    /// Upstream's default packing: uncore caches are not considered.
    #[default]
    Ignore,
    /// Prefer aligning by uncore cache: after whole NUMA nodes and sockets, take whole
    /// uncore caches, or a fitting part of one, before whole cores.
    Prefer,
}

/// How free CPUs are ordered for single-thread picking (upstream `CPUSortingStrategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CpuSortingStrategy {
    /// Core by core (upstream `packed`, the default).
    #[default]
    Packed,
    /// Socket by socket, one CPU of each of the socket's cores per pass (upstream `spread` as
    /// of v1.38, #140766; selected by `distribute-cpus-across-cores`); whole cores are not
    /// taken first.
    Spread,
    /// Upstream `spread` of v1.31–v1.37: socket by socket, the socket's free CPUs in id
    /// order — spreading over cores only where firmware numbers every core's first thread
    /// before the second ones (upstream issue #140688). The static policy never selects it;
    /// it replays decisions recorded from those releases (the conformance vectors are
    /// v1.32's).
    SpreadByCpuId,
}

impl CpuSortingStrategy {
    /// Whether CPUs are spread over cores (either `spread` order): whole cores are then not
    /// taken before single CPUs.
    pub const fn spreads(self) -> bool {
        matches!(
            self,
            CpuSortingStrategy::Spread | CpuSortingStrategy::SpreadByCpuId
        )
    }

    /// Upstream's string (`packed`, `spread`); `spread-by-cpu-id` for the v1.31–v1.37 order.
    pub const fn as_str(self) -> &'static str {
        match self {
            CpuSortingStrategy::Packed => "packed",
            CpuSortingStrategy::Spread => "spread",
            CpuSortingStrategy::SpreadByCpuId => "spread-by-cpu-id",
        }
    }
}

impl fmt::Display for CpuSortingStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CpuSortingStrategy {
    type Err = TakeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "packed" => Ok(CpuSortingStrategy::Packed),
            "spread" => Ok(CpuSortingStrategy::Spread),
            "spread-by-cpu-id" => Ok(CpuSortingStrategy::SpreadByCpuId),
            other => Err(TakeError::UnknownStrategy {
                name: other.to_owned(),
            }),
        }
    }
}

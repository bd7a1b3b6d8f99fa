//! [`NumaMask`]: the topology manager's bitmask over NUMA node ids 0–63, with the semantics
//! of upstream's `topologymanager/bitmask.BitMask` (including its ordering, its zero-padded
//! binary `String` and the callback order of `IterateBitMasks`).
//!
//! Bit *i* is NUMA node *i*, as upstream, except on a machine whose node ids reach 64 or more:
//! there [`NumaIds`](crate::NumaIds) says which node each bit stands for.

use std::fmt;

/// Why a [`NumaMask`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumaMaskError {
    /// A NUMA id outside 0–63 (upstream: "bit number must be in range 0-63").
    #[error("NUMA node id {id} is out of range: bit number must be in range 0-63")]
    OutOfRange {
        /// The offending id.
        id: i64,
    },
}

/// A set of NUMA node ids 0–63 (upstream `bitmask.BitMask`, a `uint64`).
///
/// Ordering as upstream: [`is_narrower_than`](Self::is_narrower_than) compares the number of
/// bits first, then the integer value; [`is_less_than`](Self::is_less_than) the integer value.
///
/// # Example
///
/// ```
/// use corral_topology::NumaMask;
///
/// let a = NumaMask::new([0, 1])?;
/// let b = NumaMask::new([2])?;
/// assert!(b.is_narrower_than(a));
/// assert!(a.is_less_than(b));
/// assert_eq!(a.or(b).get_bits(), vec![0, 1, 2]);
/// assert!(a.and(b).is_empty());
/// assert!(NumaMask::new([64]).is_err());
/// # Ok::<(), corral_topology::NumaMaskError>(())
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NumaMask(u64);

impl NumaMask {
    /// The empty mask (upstream `NewEmptyBitMask`).
    pub const EMPTY: NumaMask = NumaMask(0);

    /// A mask with the given ids set (upstream `NewBitMask`); fails on any id ≥ 64.
    pub fn new(ids: impl IntoIterator<Item = usize>) -> Result<NumaMask, NumaMaskError> {
        let mut bits = 0u64;
        for id in ids {
            if id >= 64 {
                return Err(NumaMaskError::OutOfRange {
                    id: i64::try_from(id).unwrap_or(i64::MAX),
                });
            }
            bits |= 1 << id;
        }
        Ok(NumaMask(bits))
    }

    /// As [`new`](Self::new), for signed ids as upstream takes them (negative ids fail too).
    pub fn from_signed(ids: impl IntoIterator<Item = i64>) -> Result<NumaMask, NumaMaskError> {
        let mut bits = 0u64;
        for id in ids {
            if !(0..64).contains(&id) {
                return Err(NumaMaskError::OutOfRange { id });
            }
            bits |= 1 << id;
        }
        Ok(NumaMask(bits))
    }

    /// The mask whose integer value is `bits` (bit i = NUMA node i).
    pub const fn from_u64(bits: u64) -> NumaMask {
        NumaMask(bits)
    }

    /// The integer value (bit i = NUMA node i).
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Set `id`; fails on ids ≥ 64 and leaves the mask unchanged then (upstream `Add`).
    pub fn add(&mut self, id: usize) -> Result<(), NumaMaskError> {
        *self = self.or(NumaMask::new([id])?);
        Ok(())
    }

    /// Clear `id`; fails on ids ≥ 64 (upstream `Remove`).
    pub fn remove(&mut self, id: usize) -> Result<(), NumaMaskError> {
        let other = NumaMask::new([id])?;
        self.0 &= !other.0;
        Ok(())
    }

    /// Bitwise AND.
    #[must_use]
    pub const fn and(self, other: NumaMask) -> NumaMask {
        NumaMask(self.0 & other.0)
    }

    /// Bitwise OR.
    #[must_use]
    pub const fn or(self, other: NumaMask) -> NumaMask {
        NumaMask(self.0 | other.0)
    }

    /// Number of ids set.
    pub const fn count(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether no id is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `id` is set (`false` for ids outside 0–63, as upstream).
    pub const fn is_set(self, id: usize) -> bool {
        id < 64 && self.0 & (1 << id) != 0
    }

    /// Whether any of `ids` is set.
    pub fn any_set(self, ids: &[usize]) -> bool {
        ids.iter().any(|&id| self.is_set(id))
    }

    /// Whether both masks hold the same ids.
    pub const fn is_equal(self, other: NumaMask) -> bool {
        self.0 == other.0
    }

    /// Upstream `IsNarrowerThan`: fewer ids, or as many and a smaller integer value.
    pub const fn is_narrower_than(self, other: NumaMask) -> bool {
        if self.count() == other.count() {
            self.is_less_than(other)
        } else {
            self.count() < other.count()
        }
    }

    /// Upstream `IsLessThan`: integer comparison.
    pub const fn is_less_than(self, other: NumaMask) -> bool {
        self.0 < other.0
    }

    /// Upstream `IsGreaterThan`: integer comparison.
    pub const fn is_greater_than(self, other: NumaMask) -> bool {
        self.0 > other.0
    }

    /// The ids set, ascending (upstream `GetBits`).
    pub fn get_bits(self) -> Vec<usize> {
        self.iter().collect()
    }

    /// The ids set, ascending, without allocating.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let id = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            Some(id)
        })
    }

    /// Call `callback` with every mask of 1, then 2, … `ids.len()` of `ids`, in the exact order
    /// of upstream's `IterateBitMasks` (lexicographic combinations of `ids` as given, by size).
    /// Ids ≥ 64 are ignored, as upstream's unchecked `NewBitMask` would drop them.
    pub fn iterate_masks(ids: &[usize], mut callback: impl FnMut(NumaMask)) {
        fn combine(
            ids: &[usize],
            accum: NumaMask,
            left: usize,
            callback: &mut impl FnMut(NumaMask),
        ) {
            if left == 0 {
                callback(accum);
                return;
            }
            // Only starts that leave enough ids for the rest: the others list nothing.
            let Some(last_start) = ids.len().checked_sub(left) else {
                return;
            };
            for (i, &id) in ids[..=last_start].iter().enumerate() {
                let bit = if id < 64 { 1u64 << id } else { 0 };
                combine(&ids[i + 1..], NumaMask(accum.0 | bit), left - 1, callback);
            }
        }
        for size in 1..=ids.len() {
            combine(ids, NumaMask::EMPTY, size, &mut callback);
        }
    }
}

impl fmt::Display for NumaMask {
    /// Upstream `String`: binary, zero-padded to the smallest even width whose top pair
    /// covers the value, with upstream's strict `>` comparison (so `4` prints as `100`).
    ///
    /// A mask does not know what its bits stand for: on a machine whose NUMA ids reach 64
    /// they are dense bits, not node ids, and [`NumaIds::show`](crate::NumaIds::show) prints
    /// the mask with the node ids it holds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grouping = 2;
        let mut shift = 64 - grouping;
        while shift > 0 {
            if self.0 > (1u64 << shift) {
                return write!(f, "{:0width$b}", self.0, width = shift + grouping);
            }
            shift -= grouping;
        }
        write!(f, "{:0width$b}", self.0, width = grouping)
    }
}

impl fmt::Debug for NumaMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NumaMask({:?})", self.get_bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_quirk() {
        assert_eq!(NumaMask::new([0]).unwrap().to_string(), "01");
        assert_eq!(NumaMask::new([2]).unwrap().to_string(), "100");
        assert_eq!(NumaMask::new([0, 2]).unwrap().to_string(), "0101");
        assert_eq!(NumaMask::EMPTY.to_string(), "00");
    }

    #[test]
    fn iterate_order() {
        let mut seen = Vec::new();
        NumaMask::iterate_masks(&[0, 1, 2], |m| seen.push(m.get_bits()));
        assert_eq!(
            seen,
            vec![
                vec![0],
                vec![1],
                vec![2],
                vec![0, 1],
                vec![0, 2],
                vec![1, 2],
                vec![0, 1, 2]
            ]
        );
    }

    #[test]
    fn errors() {
        for (got, id) in [
            (NumaMask::new([0, 64]), 64),
            (NumaMask::from_signed([-1]), -1),
        ] {
            assert_eq!(got, Err(NumaMaskError::OutOfRange { id }));
        }
        let mut m = NumaMask::new([1]).unwrap();
        assert!(m.add(64).is_err());
        assert_eq!(m.get_bits(), vec![1]);
        assert!(!m.is_set(64));
    }
}

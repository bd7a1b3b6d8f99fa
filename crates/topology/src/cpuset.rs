//! [`CpuSet`]: a set of CPU ids stored as a bitset.
//!
//! Ids below [`CpuSet::DENSE_LIMIT`] are bits: the first 1024 in an inline array of sixteen
//! words (no allocation), the rest in a heap-allocated word vector that grows on demand. Every
//! set operation over them is O(words). Ids at or above the dense limit (which no real machine
//! has, but which `k8s.io/utils/cpuset` accepts: it parses any non-negative `int`) live in a
//! sorted vector beside the bits, so such sets still round-trip exactly.
//!
//! The Linux list format ("0-3,8,10-11") lives in [`crate::cpuset_format`], the iterators
//! in [`iter`].

mod iter;

use std::fmt;

pub use iter::{IntoIter, Iter, Ranges};

/// Number of 64-bit words kept inline (1024 CPUs without allocating).
const INLINE_WORDS: usize = 16;
const WORD_BITS: usize = 64;

/// A set of CPU ids (as `k8s.io/utils/cpuset.CPUSet`), stored as a bitset.
///
/// Iteration is ascending. Equality, hashing and every operation are independent of how the
/// set was built.
///
/// # Example
///
/// ```
/// use corral_topology::CpuSet;
///
/// let a: CpuSet = "0-3,8".parse()?;
/// let b = CpuSet::from_iter([2, 3, 4]);
/// assert_eq!(a.union(&b).to_string(), "0-4,8");
/// assert_eq!(a.intersection(&b).to_vec(), vec![2, 3]);
/// assert_eq!(a.difference(&b).to_string(), "0-1,8");
/// assert!(CpuSet::from_iter([2, 3]).is_subset_of(&a));
/// assert_eq!(a.min(), Some(0));
/// # Ok::<(), corral_topology::CpuSetParseError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    /// Words 0..16 (CPUs 0..1024).
    inline: [u64; INLINE_WORDS],
    /// Words 16.. (CPUs 1024..DENSE_LIMIT); never ends with a zero word.
    spill: Vec<u64>,
    /// Sorted, unique ids at or above `DENSE_LIMIT`.
    sparse: Vec<usize>,
}

impl CpuSet {
    /// CPU ids below this limit are stored as bits; larger ids in a sorted side vector.
    pub const DENSE_LIMIT: usize = 1 << 16;

    /// The empty set.
    pub const fn new() -> Self {
        CpuSet {
            inline: [0; INLINE_WORDS],
            spill: Vec::new(),
            sparse: Vec::new(),
        }
    }

    /// The set of every id in `start..=end` (empty when `start > end`).
    pub fn from_range(start: usize, end: usize) -> Self {
        let mut set = CpuSet::new();
        set.insert_range(start, end);
        set
    }

    /// The set of the given ids, in any order, duplicates allowed.
    pub fn from_cpus(cpus: &[usize]) -> Self {
        cpus.iter().copied().collect()
    }

    #[inline]
    fn word(&self, index: usize) -> u64 {
        if index < INLINE_WORDS {
            self.inline[index]
        } else {
            self.spill.get(index - INLINE_WORDS).copied().unwrap_or(0)
        }
    }

    #[inline]
    fn dense_words(&self) -> usize {
        INLINE_WORDS + self.spill.len()
    }

    #[inline]
    fn word_mut(&mut self, index: usize) -> &mut u64 {
        if index < INLINE_WORDS {
            &mut self.inline[index]
        } else {
            let at = index - INLINE_WORDS;
            if self.spill.len() <= at {
                self.spill.resize(at + 1, 0);
            }
            &mut self.spill[at]
        }
    }

    fn trim(&mut self) {
        while self.spill.last() == Some(&0) {
            self.spill.pop();
        }
    }

    /// Add `cpu`; returns whether it was absent.
    #[inline]
    pub fn insert(&mut self, cpu: usize) -> bool {
        // The inline words inline; the rest out of line.
        let Some(word) = self.inline.get_mut(cpu / WORD_BITS) else {
            return self.insert_outside_inline(cpu);
        };
        let bit = 1u64 << (cpu % WORD_BITS);
        let absent = *word & bit == 0;
        *word |= bit;
        absent
    }

    /// [`CpuSet::insert`] of an id past the inline words.
    #[inline(never)]
    fn insert_outside_inline(&mut self, cpu: usize) -> bool {
        if cpu >= Self::DENSE_LIMIT {
            return match self.sparse.binary_search(&cpu) {
                Ok(_) => false,
                Err(at) => {
                    self.sparse.insert(at, cpu);
                    true
                }
            };
        }
        let word = self.word_mut(cpu / WORD_BITS);
        let bit = 1u64 << (cpu % WORD_BITS);
        let absent = *word & bit == 0;
        *word |= bit;
        absent
    }

    /// Add every id in `start..=end`.
    pub fn insert_range(&mut self, start: usize, end: usize) {
        if start > end {
            return;
        }
        let dense_end = end.min(Self::DENSE_LIMIT - 1);
        let mut cpu = start;
        while cpu <= dense_end {
            let index = cpu / WORD_BITS;
            let lo = cpu % WORD_BITS;
            let hi = if dense_end / WORD_BITS == index {
                dense_end % WORD_BITS
            } else {
                WORD_BITS - 1
            };
            let mask = (u64::MAX >> (WORD_BITS - 1 - hi)) & (u64::MAX << lo);
            *self.word_mut(index) |= mask;
            cpu = (index + 1) * WORD_BITS;
        }
        if end >= Self::DENSE_LIMIT {
            let from = start.max(Self::DENSE_LIMIT);
            let mut extra: Vec<usize> = (from..=end).collect();
            if self.sparse.is_empty() {
                self.sparse = extra;
            } else {
                extra.extend_from_slice(&self.sparse);
                extra.sort_unstable();
                extra.dedup();
                self.sparse = extra;
            }
        }
    }

    /// Remove `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: usize) -> bool {
        if cpu >= Self::DENSE_LIMIT {
            return match self.sparse.binary_search(&cpu) {
                Ok(at) => {
                    self.sparse.remove(at);
                    true
                }
                Err(_) => false,
            };
        }
        let index = cpu / WORD_BITS;
        if index >= self.dense_words() {
            return false;
        }
        let bit = 1u64 << (cpu % WORD_BITS);
        let word = self.word_mut(index);
        let present = *word & bit != 0;
        *word &= !bit;
        self.trim();
        present
    }

    /// Whether `cpu` is in the set.
    #[inline]
    pub fn contains(&self, cpu: usize) -> bool {
        if cpu >= Self::DENSE_LIMIT {
            return self.sparse.binary_search(&cpu).is_ok();
        }
        self.word(cpu / WORD_BITS) & (1u64 << (cpu % WORD_BITS)) != 0
    }

    /// Number of CPUs in the set (upstream `Size`).
    #[inline]
    pub fn len(&self) -> usize {
        ones(self.inline.iter().chain(&self.spill).copied()) + self.sparse.len()
    }

    /// Whether the set has no CPU.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inline.iter().all(|&w| w == 0) && self.spill.is_empty() && self.sparse.is_empty()
    }

    /// The smallest CPU id, if any.
    pub fn min(&self) -> Option<usize> {
        (0..self.dense_words())
            .find_map(|i| {
                let w = self.word(i);
                (w != 0).then(|| i * WORD_BITS + w.trailing_zeros() as usize)
            })
            .or_else(|| self.sparse.first().copied())
    }

    /// The largest CPU id, if any.
    pub fn max(&self) -> Option<usize> {
        if let Some(&last) = self.sparse.last() {
            return Some(last);
        }
        (0..self.dense_words()).rev().find_map(|i| {
            let w = self.word(i);
            (w != 0).then(|| i * WORD_BITS + (WORD_BITS - 1 - w.leading_zeros() as usize))
        })
    }

    /// A copy of `self` changed by `op` with `other`.
    #[inline]
    fn combined(&self, other: &CpuSet, op: fn(&mut CpuSet, &CpuSet)) -> CpuSet {
        let mut out = self.clone();
        op(&mut out, other);
        out
    }

    /// `op` on each word of `self`'s bitmap with the same word of `other`'s, for the words
    /// both have (inline, then spilled).
    #[inline]
    fn zip_words(&mut self, other: &CpuSet, op: impl Fn(&mut u64, u64)) {
        for (a, b) in self.inline.iter_mut().zip(other.inline.iter()) {
            op(a, *b);
        }
        for (a, b) in self.spill.iter_mut().zip(other.spill.iter()) {
            op(a, *b);
        }
    }

    /// The words of `self`'s bitmap beside the same words of `other`'s, for the words both
    /// have (inline, then spilled).
    #[inline]
    fn word_pairs<'a>(&'a self, other: &'a CpuSet) -> impl Iterator<Item = (u64, u64)> + 'a {
        let inline = self.inline.iter().zip(other.inline.iter());
        let spill = self.spill.iter().zip(other.spill.iter());
        inline.chain(spill).map(|(a, b)| (*a, *b))
    }

    /// The CPUs in `self` or `other`.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        self.combined(other, CpuSet::union_with)
    }

    /// Add every CPU of `other` to `self`.
    pub fn union_with(&mut self, other: &CpuSet) {
        if self.spill.len() < other.spill.len() {
            self.spill.resize(other.spill.len(), 0);
        }
        self.zip_words(other, |a, b| *a |= b);
        if !other.sparse.is_empty() {
            self.sparse = merge_sorted(&self.sparse, &other.sparse, SortedOp::Union);
        }
    }

    /// The CPUs in both `self` and `other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        self.combined(other, CpuSet::intersect_with)
    }

    /// Keep only the CPUs of `self` that are also in `other`.
    pub fn intersect_with(&mut self, other: &CpuSet) {
        self.spill.truncate(other.spill.len());
        self.zip_words(other, |a, b| *a &= b);
        self.trim();
        if !self.sparse.is_empty() {
            self.sparse = merge_sorted(&self.sparse, &other.sparse, SortedOp::Intersection);
        }
    }

    /// The CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        self.combined(other, CpuSet::difference_with)
    }

    /// Remove every CPU of `other` from `self`.
    pub fn difference_with(&mut self, other: &CpuSet) {
        self.zip_words(other, |a, b| *a &= !b);
        self.trim();
        if !self.sparse.is_empty() && !other.sparse.is_empty() {
            self.sparse = merge_sorted(&self.sparse, &other.sparse, SortedOp::Difference);
        }
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset_of(&self, other: &CpuSet) -> bool {
        self.inline
            .iter()
            .zip(other.inline.iter())
            .all(|(a, b)| a & !b == 0)
            && self
                .spill
                .iter()
                .enumerate()
                .all(|(i, a)| a & !other.spill.get(i).copied().unwrap_or(0) == 0)
            && self
                .sparse
                .iter()
                .all(|cpu| other.sparse.binary_search(cpu).is_ok())
    }

    /// Whether `self` and `other` have at least one CPU in common.
    #[inline]
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.word_pairs(other).any(|(a, b)| a & b != 0)
            || self
                .sparse
                .iter()
                .any(|cpu| other.sparse.binary_search(cpu).is_ok())
    }

    /// Number of CPUs in both `self` and `other`, without building the intersection.
    #[inline]
    pub fn intersection_len(&self, other: &CpuSet) -> usize {
        let dense = ones(self.word_pairs(other).map(|(a, b)| a & b));
        let sparse = self
            .sparse
            .iter()
            .filter(|cpu| other.sparse.binary_search(cpu).is_ok())
            .count();
        dense + sparse
    }

    /// The CPUs in ascending order.
    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// The CPUs as an ascending vector (upstream `List`).
    pub fn to_vec(&self) -> Vec<usize> {
        self.iter().collect()
    }

    /// The first `n` CPUs in ascending order (all of them when `n >= len`).
    pub fn first_n(&self, n: usize) -> CpuSet {
        self.iter().take(n).collect()
    }

    /// Call `f` with every maximal run, as [`CpuSet::ranges`] yields them, until `f` fails:
    /// one tight loop over the words with the open run in registers (for printing).
    #[inline(always)]
    pub(crate) fn try_for_each_range<E>(
        &self,
        mut f: impl FnMut(usize, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        // The open run, inclusive.
        let mut open: Option<(usize, usize)> = None;
        let mut extend = |start: usize, end: usize| -> Result<(), E> {
            match open {
                Some((first, last)) if last.checked_add(1) == Some(start) => {
                    open = Some((first, end));
                }
                Some((first, last)) => {
                    f(first, last)?;
                    open = Some((start, end));
                }
                None => open = Some((start, end)),
            }
            Ok(())
        };
        for (index, &word) in self.inline.iter().chain(&self.spill).enumerate() {
            let base = index * WORD_BITS;
            let mut rest = word;
            while rest != 0 {
                let lo = rest.trailing_zeros() as usize;
                let ones = (rest >> lo).trailing_ones() as usize;
                extend(base + lo, base + lo + ones - 1)?;
                if lo + ones == WORD_BITS {
                    break;
                }
                rest &= u64::MAX << (lo + ones);
            }
        }
        for &cpu in &self.sparse {
            extend(cpu, cpu)?;
        }
        match open {
            Some((first, last)) => f(first, last),
            None => Ok(()),
        }
    }

    /// Maximal runs of consecutive CPUs, ascending, as inclusive `(start, end)` pairs.
    pub fn ranges(&self) -> Ranges<'_> {
        Ranges::new(self)
    }
}

/// The ones in `words`, skipping zero words: without a popcount instruction (the baseline
/// x86-64 target has none) a word's count is a dozen instructions, and most words of a set
/// on a real machine are zero.
#[inline]
fn ones(words: impl Iterator<Item = u64>) -> usize {
    words
        .filter(|&w| w != 0)
        .map(|w| w.count_ones() as usize)
        .sum()
}

#[derive(Clone, Copy)]
enum SortedOp {
    Union,
    Intersection,
    Difference,
}

fn merge_sorted(a: &[usize], b: &[usize], op: SortedOp) -> Vec<usize> {
    let mut out = Vec::with_capacity(match op {
        SortedOp::Union => a.len() + b.len(),
        _ => a.len(),
    });
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                if !matches!(op, SortedOp::Intersection) {
                    out.push(a[i]);
                }
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                if matches!(op, SortedOp::Union) {
                    out.push(b[j]);
                }
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                if !matches!(op, SortedOp::Difference) {
                    out.push(a[i]);
                }
                i += 1;
                j += 1;
            }
        }
    }
    if !matches!(op, SortedOp::Intersection) {
        out.extend_from_slice(&a[i..]);
    }
    if matches!(op, SortedOp::Union) {
        out.extend_from_slice(&b[j..]);
    }
    out
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet(\"{self}\")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_contains_across_storage() {
        let mut set = CpuSet::new();
        for cpu in [0, 63, 64, 1023, 1024, 8191, 65535, 65536, 1 << 40] {
            assert!(set.insert(cpu));
            assert!(!set.insert(cpu));
            assert!(set.contains(cpu));
        }
        assert_eq!(set.len(), 9);
        assert_eq!(set.min(), Some(0));
        assert_eq!(set.max(), Some(1 << 40));
        assert!(set.remove(8191));
        assert!(!set.remove(8191));
        assert!(set.remove(1 << 40));
        assert_eq!(set.to_vec(), vec![0, 63, 64, 1023, 1024, 65535, 65536]);
    }

    #[test]
    fn equality_ignores_spill_history() {
        let mut a = CpuSet::from_iter([1, 5000]);
        a.remove(5000);
        assert_eq!(a, CpuSet::from_iter([1]));
        let b = CpuSet::from_iter([1, 5000]).intersection(&CpuSet::from_iter([1]));
        assert_eq!(b, a);
    }

    #[test]
    fn ranges_cross_the_dense_limit() {
        let limit = CpuSet::DENSE_LIMIT;
        let set = CpuSet::from_range(limit - 2, limit + 1);
        assert_eq!(
            set.ranges().collect::<Vec<_>>(),
            vec![(limit - 2, limit + 1)]
        );
        assert_eq!(set.len(), 4);
    }

    #[test]
    fn range_insertion_matches_elementwise() {
        for (s, e) in [(0, 0), (0, 63), (3, 64), (60, 200), (1000, 1100), (5, 4)] {
            let a = CpuSet::from_range(s, e);
            let b: CpuSet = (s..=e).collect();
            assert_eq!(a, b, "{s}-{e}");
        }
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::from_iter([0, 1, 2, 2000, 70000]);
        let b = CpuSet::from_iter([2, 3, 2000, 70001]);
        assert_eq!(a.union(&b).to_vec(), vec![0, 1, 2, 3, 2000, 70000, 70001]);
        assert_eq!(a.intersection(&b).to_vec(), vec![2, 2000]);
        assert_eq!(a.difference(&b).to_vec(), vec![0, 1, 70000]);
        assert_eq!(a.intersection_len(&b), 2);
        assert!(a.intersects(&b));
        assert!(!a.is_subset_of(&b));
        assert!(a.intersection(&b).is_subset_of(&b));
        assert!(CpuSet::new().is_subset_of(&CpuSet::new()));
        assert_eq!(a.first_n(2).to_vec(), vec![0, 1]);
    }
}

//! The iterators over a [`CpuSet`] — its ids ([`Iter`], [`IntoIter`]) and its maximal runs
//! ([`Ranges`]) — and building a set from ids ([`FromIterator`], [`Extend`]).

use super::{CpuSet, WORD_BITS};

/// Ascending iterator over a [`CpuSet`].
///
/// # Example
///
/// ```
/// use corral_topology::CpuSet;
///
/// let set = CpuSet::from_iter([7, 1, 3]);
/// assert_eq!(set.iter().collect::<Vec<_>>(), [1, 3, 7]);
/// assert_eq!(set.iter().max(), Some(7));
/// ```
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    set: &'a CpuSet,
    word_index: usize,
    word: u64,
    sparse_index: usize,
}

impl<'a> Iter<'a> {
    /// From `set`'s lowest id.
    #[inline]
    pub(super) fn new(set: &'a CpuSet) -> Iter<'a> {
        Iter {
            set,
            word_index: 0,
            word: set.inline[0],
            sparse_index: 0,
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let words = self.set.dense_words();
        while self.word_index < words {
            if self.word != 0 {
                let bit = self.word.trailing_zeros() as usize;
                self.word &= self.word - 1;
                return Some(self.word_index * WORD_BITS + bit);
            }
            self.word_index += 1;
            if self.word_index < words {
                self.word = self.set.word(self.word_index);
            }
        }
        let cpu = self.set.sparse.get(self.sparse_index).copied();
        self.sparse_index += 1;
        cpu
    }
}

/// Iterator over the maximal runs of a [`CpuSet`]; see [`CpuSet::ranges`].
///
/// Walks the dense words a run at a time (`trailing_zeros` / `trailing_ones`), so a run
/// costs a few instructions however long it is.
///
/// # Example
///
/// ```
/// use corral_topology::CpuSet;
///
/// let set: CpuSet = "0-3,8,10-11".parse()?;
/// assert_eq!(set.ranges().collect::<Vec<_>>(), [(0, 3), (8, 8), (10, 11)]);
/// # Ok::<(), corral_topology::CpuSetParseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ranges<'a> {
    set: &'a CpuSet,
    /// The dense word being walked (`dense_words()` once they are done).
    word_index: usize,
    /// Its bits not reported yet.
    word: u64,
    sparse_index: usize,
}

impl<'a> Ranges<'a> {
    /// From `set`'s lowest run.
    pub(super) fn new(set: &'a CpuSet) -> Ranges<'a> {
        Ranges {
            set,
            word_index: 0,
            word: set.inline[0],
            sparse_index: 0,
        }
    }

    /// The next dense run, if any.
    fn next_dense(&mut self) -> Option<(usize, usize)> {
        let words = self.set.dense_words();
        while self.word == 0 {
            if self.word_index >= words {
                return None;
            }
            self.word_index += 1;
            if self.word_index >= words {
                return None;
            }
            self.word = self.set.word(self.word_index);
        }
        let lo = self.word.trailing_zeros() as usize;
        let start = self.word_index * WORD_BITS + lo;
        let ones = (self.word >> lo).trailing_ones() as usize;
        if lo + ones < WORD_BITS {
            // The run ends inside this word: clear it (`ones < 64` here).
            self.word &= !(((1u64 << ones) - 1) << lo);
            return Some((start, start + ones - 1));
        }
        // The run reaches the word's end: follow it through the next words.
        loop {
            self.word_index += 1;
            if self.word_index >= words {
                self.word = 0;
                return Some((start, words * WORD_BITS - 1));
            }
            let word = self.set.word(self.word_index);
            let ones = word.trailing_ones() as usize;
            if ones < WORD_BITS {
                self.word = word & (u64::MAX << ones);
                return Some((start, self.word_index * WORD_BITS + ones - 1));
            }
        }
    }
}

impl Iterator for Ranges<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let sparse = &self.set.sparse;
        if let Some((start, mut end)) = self.next_dense() {
            // A run reaching the dense limit continues into the sparse ids.
            if end == CpuSet::DENSE_LIMIT - 1 {
                while sparse.get(self.sparse_index) == Some(&(end + 1)) {
                    end += 1;
                    self.sparse_index += 1;
                }
            }
            return Some((start, end));
        }
        let start = *sparse.get(self.sparse_index)?;
        let mut end = start;
        self.sparse_index += 1;
        while let (Some(&next), Some(want)) = (sparse.get(self.sparse_index), end.checked_add(1)) {
            if next != want {
                break;
            }
            end = next;
            self.sparse_index += 1;
        }
        Some((start, end))
    }
}

/// Owning ascending iterator over a [`CpuSet`].
#[derive(Debug, Clone)]
pub struct IntoIter {
    set: CpuSet,
    word_index: usize,
    word: u64,
    sparse_index: usize,
}

impl Iterator for IntoIter {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let mut borrowed = Iter {
            set: &self.set,
            word_index: self.word_index,
            word: self.word,
            sparse_index: self.sparse_index,
        };
        let next = borrowed.next();
        self.word_index = borrowed.word_index;
        self.word = borrowed.word;
        self.sparse_index = borrowed.sparse_index;
        next
    }
}

impl IntoIterator for CpuSet {
    type Item = usize;
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        let word = self.inline[0];
        IntoIter {
            set: self,
            word_index: 0,
            word,
            sparse_index: 0,
        }
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = usize;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        let mut set = CpuSet::new();
        set.extend(iter);
        set
    }
}

impl Extend<usize> for CpuSet {
    fn extend<I: IntoIterator<Item = usize>>(&mut self, iter: I) {
        for cpu in iter {
            self.insert(cpu);
        }
    }
}

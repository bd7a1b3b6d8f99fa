//! A small growable bitset over device indices, used by the device tables so that
//! "healthy minus allocated" and the NUMA split of thousands of devices are word operations.

/// A set of `usize` indices stored as 64-bit words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    /// An empty set able to hold `len` indices without growing.
    pub(crate) fn with_len(len: usize) -> BitSet {
        BitSet {
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// Add `index`.
    pub(crate) fn insert(&mut self, index: usize) {
        let word = index / 64;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (index % 64);
    }

    /// Remove `index`.
    pub(crate) fn remove(&mut self, index: usize) {
        if let Some(word) = self.words.get_mut(index / 64) {
            *word &= !(1 << (index % 64));
        }
    }

    /// Whether `index` is in the set.
    pub(crate) fn contains(&self, index: usize) -> bool {
        self.words
            .get(index / 64)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// Number of indices in the set.
    pub(crate) fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Remove every index.
    pub(crate) fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// `self − other`.
    pub(crate) fn difference(&self, other: &BitSet) -> BitSet {
        let words = self
            .words
            .iter()
            .enumerate()
            .map(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0))
            .collect();
        BitSet { words }
    }

    /// `self ∪= other`.
    pub(crate) fn union_with(&mut self, other: &BitSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// The indices, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(i * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let mut a = BitSet::with_len(10);
        a.insert(3);
        a.insert(130);
        assert!(a.contains(130) && a.contains(3) && !a.contains(4));
        assert_eq!(a.len(), 2);
        let mut b = BitSet::default();
        b.insert(3);
        assert_eq!(a.difference(&b).iter().collect::<Vec<_>>(), vec![130]);
        b.union_with(&a);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![3, 130]);
        b.remove(3);
        b.remove(9999);
        assert_eq!(b.len(), 1);
        b.clear();
        assert!(b.is_empty());
    }
}

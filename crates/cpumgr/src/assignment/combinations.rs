//! Upstream `iterateCombinations`, including the way its Go slices share memory.
//!
//! Upstream builds each combination with `append(accum, n[i])`, starting from `[]int{}`.
//! Go's `append` writes in place while the backing array has room and otherwise copies into
//! a new array of twice the capacity (1, 2, 4, 8, … for `[]int` at these sizes). So every
//! combination of length 4 built on the same 3-prefix shares one array (capacity 4), as do
//! the lengths 6–8 built on the same 5-prefix (capacity 8). A caller that remembers a
//! combination and keeps iterating sees its tail overwritten by later candidates —
//! including the candidate whose callback merely returns `Break`. The distributed algorithm
//! remembers its best NUMA combination and remainder subset this way, so to give upstream's
//! answers this module models the arrays: [`GoSlices`] is an arena of backing arrays with
//! Go's growth rule, and a [`SliceRef`] is a slice header into it.

/// What the callback tells the iteration (upstream `LoopControl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loop {
    Continue,
    Break,
}

/// A Go slice header: backing array and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SliceRef {
    array: usize,
    len: usize,
}

/// An arena of Go backing arrays.
#[derive(Debug, Default)]
pub(crate) struct GoSlices {
    data: Vec<usize>,
    /// (offset into `data`, capacity) per array.
    arrays: Vec<(usize, usize)>,
}

/// Go's `growslice` for 8-byte elements: double below 256 elements (power-of-two sizes are
/// exact size classes there), then grow by a quarter plus 192.
fn grown_capacity(old: usize, needed: usize) -> usize {
    if needed > old * 2 {
        return needed;
    }
    if old < 256 {
        return old * 2;
    }
    let mut cap = old;
    while cap < needed {
        cap += (cap + 3 * 256) / 4;
    }
    cap
}

impl GoSlices {
    pub(crate) fn new() -> GoSlices {
        GoSlices::default()
    }

    /// `[]int{}`: an empty slice with no capacity.
    fn empty(&mut self) -> SliceRef {
        self.arrays.push((self.data.len(), 0));
        SliceRef {
            array: self.arrays.len() - 1,
            len: 0,
        }
    }

    /// Go's `append(s, x)`.
    fn append(&mut self, s: SliceRef, x: usize) -> SliceRef {
        let (offset, cap) = self.arrays[s.array];
        if s.len < cap {
            self.data[offset + s.len] = x;
            return SliceRef {
                array: s.array,
                len: s.len + 1,
            };
        }
        let new_cap = grown_capacity(cap, s.len + 1);
        let new_offset = self.data.len();
        self.data.extend_from_within(offset..offset + s.len);
        self.data.push(x);
        self.data.resize(new_offset + new_cap, 0);
        self.arrays.push((new_offset, new_cap));
        SliceRef {
            array: self.arrays.len() - 1,
            len: s.len + 1,
        }
    }

    /// The elements `s` sees now.
    pub(crate) fn get(&self, s: SliceRef) -> &[usize] {
        let (offset, _) = self.arrays[s.array];
        &self.data[offset..offset + s.len]
    }
}

/// Call `f` with every `k`-subset of `n` in lexicographic order of positions, until it
/// returns [`Loop::Break`] (upstream `iterateCombinations`, slices modelled in `slices`).
pub(crate) fn iterate_combinations(
    slices: &mut GoSlices,
    n: &[usize],
    k: usize,
    f: &mut impl FnMut(&GoSlices, SliceRef) -> Loop,
) {
    fn helper(
        slices: &mut GoSlices,
        n: &[usize],
        k: usize,
        start: usize,
        accum: SliceRef,
        f: &mut impl FnMut(&GoSlices, SliceRef) -> Loop,
    ) -> Loop {
        if k == 0 {
            return f(slices, accum);
        }
        let Some(last) = n.len().checked_sub(k) else {
            return Loop::Continue;
        };
        for i in start..=last {
            let next = slices.append(accum, n[i]);
            if helper(slices, n, k - 1, i + 1, next, f) == Loop::Break {
                return Loop::Break;
            }
        }
        Loop::Continue
    }
    if k < 1 {
        return;
    }
    let accum = slices.empty();
    helper(slices, n, k, 0, accum, f);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(n: &[usize], k: usize) -> Vec<Vec<usize>> {
        let mut slices = GoSlices::new();
        let mut seen = Vec::new();
        iterate_combinations(&mut slices, n, k, &mut |s, r| {
            seen.push(s.get(r).to_vec());
            Loop::Continue
        });
        seen
    }

    #[test]
    fn order_is_lexicographic() {
        assert_eq!(all(&[0, 1, 2], 2), vec![vec![0, 1], vec![0, 2], vec![1, 2]]);
        assert_eq!(all(&[5, 3], 3), Vec::<Vec<usize>>::new());
        assert_eq!(all(&[5, 3], 0), Vec::<Vec<usize>>::new());
    }

    #[test]
    fn remembered_four_combinations_share_their_tail() {
        // The first 4-combination of 0..6 is [0,1,2,3]; it shares its array with [0,1,2,4]
        // and [0,1,2,5], so after the iteration it reads [0,1,2,5].
        let mut slices = GoSlices::new();
        let mut first = None;
        iterate_combinations(&mut slices, &[0, 1, 2, 3, 4, 5], 4, &mut |_, r| {
            first.get_or_insert(r);
            Loop::Continue
        });
        assert_eq!(slices.get(first.unwrap()), &[0, 1, 2, 5]);
        // 3- and 5-combinations have their own arrays.
        let mut slices = GoSlices::new();
        let mut first = None;
        iterate_combinations(&mut slices, &[0, 1, 2, 3, 4, 5], 5, &mut |_, r| {
            first.get_or_insert(r);
            Loop::Continue
        });
        assert_eq!(slices.get(first.unwrap()), &[0, 1, 2, 3, 4]);
    }

    #[test]
    fn break_still_overwrites_the_tail() {
        let mut slices = GoSlices::new();
        let mut first = None;
        iterate_combinations(&mut slices, &[0, 1, 2, 3, 4, 5], 4, &mut |_, r| {
            if first.is_some() {
                return Loop::Break;
            }
            first = Some(r);
            Loop::Continue
        });
        assert_eq!(slices.get(first.unwrap()), &[0, 1, 2, 4]);
    }
}

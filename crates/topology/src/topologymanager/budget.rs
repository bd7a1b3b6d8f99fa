//! The bound on a decision's work: a budget of search steps.
//!
//! The searches behind hint families ([`HintFamily`](super::HintFamily), the merge of
//! families, [`min_affinity_size`](super::min_affinity_size)) are exact, and exponential in
//! the number of NUMA nodes on inputs an adversary or an unlucky machine can produce. Each
//! step they take (one node decided in a branch and bound, one merge state built) is
//! drawn from the budget [`bounded`] opens on the calling thread; when it runs out, every
//! search still running stops and answers the best it has proven (see each search), and
//! the [`Effort`] says the answer was approximate. Steps, not time: the same input gets the
//! same answer on any machine, under any load.
//!
//! A budget is per thread and nests: [`bounded`] called inside another shares the outer
//! budget, so one admission (every provider's hints, the merge, the allocations) draws on
//! one budget. Searches called outside any [`bounded`] are unbounded; every public entry
//! point of this crate that searches opens one.
//!
//! ```
//! use corral_topology::topologymanager::{DECISION_STEPS, bounded};
//!
//! let (answer, effort) = bounded(DECISION_STEPS, || 6 * 7);
//! assert_eq!(answer, 42);
//! assert!(effort.exact);
//! assert_eq!(effort.steps, 0);
//! ```

use std::cell::Cell;

/// The steps one decision may take: every search of one admission together (hints of
/// every provider, the merge, the allocations). A step is about 0.1–0.3 µs of work on
/// this project's CI machines (a search charges each node it decides by the demands it
/// checks there), so a decision that runs out took a few milliseconds; realistic
/// admissions take a few hundred steps.
pub const DECISION_STEPS: u64 = 40_000;

/// What a [`bounded`] run took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effort {
    /// Search steps taken.
    pub steps: u64,
    /// Whether every search finished within the budget, so the answer is exact; `false`
    /// when the budget ran out (this run's or, nested, the outer run's).
    pub exact: bool,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    left: u64,
    spent: u64,
    exhausted: bool,
}

thread_local! {
    static OPEN: Cell<Option<Open>> = const { Cell::new(None) };
}

/// Runs `work` with a budget of `steps` search steps on this thread (or, inside another
/// [`bounded`], on the outer budget), and says what it took.
pub fn bounded<T>(steps: u64, work: impl FnOnce() -> T) -> (T, Effort) {
    if let Some(outer) = OPEN.get() {
        let value = work();
        let now = OPEN.get().unwrap_or(outer);
        return (
            value,
            Effort {
                steps: now.spent - outer.spent,
                exact: !now.exhausted,
            },
        );
    }
    /// Closes the budget also when `work` panics.
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            OPEN.set(None);
        }
    }
    OPEN.set(Some(Open {
        left: steps,
        spent: 0,
        exhausted: false,
    }));
    let close = Close;
    let value = work();
    let open = OPEN.get();
    drop(close);
    let open = open.unwrap_or(Open {
        left: 0,
        spent: 0,
        exhausted: false,
    });
    (
        value,
        Effort {
            steps: open.spent,
            exact: !open.exhausted,
        },
    )
}

/// Runs `work` with a budget of `steps` of its own, also inside another [`bounded`] (whose
/// budget it neither draws on nor is starved by: e.g. an allocation after a decision that
/// used up its budget); running out marks the outer run approximate too.
///
/// ```
/// use corral_topology::topologymanager::{bounded, bounded_apart, spend};
///
/// let ((), outer) = bounded(1, || {
///     assert!(spend(1) && !spend(1));
///     let (taken, inner) = bounded_apart(5, || (0..9).take_while(|_| spend(1)).count());
///     assert_eq!((taken, inner.exact), (5, false));
/// });
/// assert!(!outer.exact);
/// ```
pub fn bounded_apart<T>(steps: u64, work: impl FnOnce() -> T) -> (T, Effort) {
    let outer = OPEN.take();
    let (value, effort) = bounded(steps, work);
    if let Some(mut outer) = outer {
        outer.exhausted |= !effort.exact;
        OPEN.set(Some(outer));
    }
    (value, effort)
}

/// Takes one step; `false` (and the budget marked exhausted) when none is left. Always
/// `true` outside [`bounded`].
pub(crate) fn step() -> bool {
    spend(1)
}

/// Takes `steps` steps (work that costs that many, about 0.1–0.3 µs each); `false` (and
/// the budget marked exhausted) when fewer are left. Always `true` outside [`bounded`].
/// For searches of other crates that run inside a decision (a CPU manager's allocation):
/// a search that is refused a step answers the best it has found.
///
/// ```
/// use corral_topology::topologymanager::{bounded, spend};
///
/// let (taken, effort) = bounded(10, || (0..100).take_while(|_| spend(1)).count());
/// assert_eq!(taken, 10);
/// assert!(!effort.exact);
/// ```
pub fn spend(steps: u64) -> bool {
    match OPEN.get() {
        None => true,
        Some(mut open) if open.left >= steps && !open.exhausted => {
            open.left -= steps;
            open.spent += steps;
            OPEN.set(Some(open));
            true
        }
        Some(mut open) => {
            open.exhausted = true;
            OPEN.set(Some(open));
            false
        }
    }
}

/// Whether the open budget has run out (a search answered without finishing).
pub(crate) fn exhausted() -> bool {
    OPEN.get().is_some_and(|open| open.exhausted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_counted_and_run_out() {
        let ((), effort) = bounded(3, || {
            assert!(step() && step() && step());
            assert!(!step());
            assert!(exhausted());
        });
        assert_eq!(
            effort,
            Effort {
                steps: 3,
                exact: false
            }
        );
    }

    #[test]
    fn a_nested_run_shares_the_outer_budget() {
        let (inner, outer) = bounded(5, || {
            assert!(step());
            let ((), inner) = bounded(1_000, || {
                for _ in 0..4 {
                    assert!(step());
                }
                assert!(!step());
            });
            inner
        });
        assert_eq!(
            inner,
            Effort {
                steps: 4,
                exact: false
            }
        );
        assert_eq!(
            outer,
            Effort {
                steps: 5,
                exact: false
            }
        );
    }

    #[test]
    fn outside_a_budget_steps_are_free_and_a_panic_closes_it() {
        assert!(step());
        assert!(!exhausted());
        let caught = std::panic::catch_unwind(|| bounded(1, || panic!("inside")));
        assert!(caught.is_err());
        assert!(step() && step());
        assert!(!exhausted());
    }
}

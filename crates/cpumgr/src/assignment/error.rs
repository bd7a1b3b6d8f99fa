//! [`TakeError`]: why CPU assignment failed, with upstream's messages.

/// Why `takeByTopology…` could not pick the CPUs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TakeError {
    /// Fewer free CPUs than requested (upstream's message).
    #[error(
        "not enough cpus available to satisfy request: requested={requested}, available={available}"
    )]
    NotEnoughCpus {
        /// CPUs requested.
        requested: usize,
        /// CPUs in the available set given.
        available: usize,
    },
    /// Every step ran and the request is still not met (upstream's message).
    #[error("failed to allocate cpus")]
    Failed,
    /// The distributed algorithm handed out fewer CPUs than requested (upstream's message).
    #[error("accounting error, not enough CPUs allocated, remaining: {remaining}")]
    AccountingNotEnough {
        /// CPUs still missing.
        remaining: i64,
    },
    /// The distributed algorithm handed out more CPUs than requested (upstream's message).
    #[error("accounting error, too many CPUs allocated, remaining: {remaining}")]
    AccountingTooMany {
        /// Negative remainder.
        remaining: i64,
    },
    /// corral only: distributing the remainder CPUs over the chosen NUMA nodes stopped making
    /// progress (upstream loops forever here).
    #[error(
        "cannot distribute the remaining {remaining} CPUs in groups of {group_size} over the chosen NUMA nodes: none has a whole group left"
    )]
    RemainderStuck {
        /// CPUs still to place.
        remaining: i64,
        /// The CPU group size.
        group_size: usize,
    },
    /// A CPU group size of 0 (upstream divides by it).
    #[error("invalid CPU group size 0")]
    ZeroGroupSize,
    /// An unknown sorting strategy name.
    #[error("unknown CPU sorting strategy {name:?} (expected \"packed\" or \"spread\")")]
    UnknownStrategy {
        /// The name given.
        name: String,
    },
}

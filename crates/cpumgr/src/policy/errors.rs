//! Errors of the policies, with upstream's messages.

use corral_topology::AllocationError;

use crate::assignment::TakeError;
use crate::options::OptionsError;

/// Upstream's admission failure reason for [`SmtAlignmentError`].
pub const SMT_ALIGNMENT_ERROR: &str = "SMTAlignmentError";

/// A `full-pcpus-only` request that is not whole cores (upstream `SMTAlignmentError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub struct SmtAlignmentError {
    /// CPUs requested.
    pub requested_cpus: usize,
    /// CPUs per core.
    pub cpus_per_core: usize,
    /// Free CPUs on whole free cores (when `caused_by_physical_cpus`).
    pub available_physical_cpus: usize,
    /// Whether too few whole cores are free (rather than an odd request).
    pub caused_by_physical_cpus: bool,
}

impl std::fmt::Display for SmtAlignmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.caused_by_physical_cpus {
            write!(
                f,
                "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {}, requested CPUs = {}, CPUs per core = {}",
                self.available_physical_cpus, self.requested_cpus, self.cpus_per_core
            )
        } else {
            write!(
                f,
                "SMT Alignment Error: requested {} cpus not multiple cpus per core = {}",
                self.requested_cpus, self.cpus_per_core
            )
        }
    }
}

/// Why a policy could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The options were refused.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// A policy name other than `none` and `static` (upstream's message).
    #[error("unknown policy: \"{name}\"")]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// The static policy without a CPU reservation (upstream's message).
    #[error("[cpumanager] unable to determine reserved CPU resources for static policy")]
    NoReservation,
    /// The static policy with a zero CPU reservation (upstream's message).
    #[error(
        "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
    )]
    ZeroReservation,
    /// The reservation could not be taken (upstream's message).
    #[error(
        "[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal {wanted})"
    )]
    Reservation {
        /// What was taken (list format).
        reserved: String,
        /// How many were wanted.
        wanted: usize,
    },
    /// An explicit reserved CPU the topology does not have (upstream's message).
    #[error(
        "[cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: {cpu}"
    )]
    UnknownReservedCpu {
        /// The CPU.
        cpu: usize,
    },
}

/// Why an allocation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AllocateError {
    /// `full-pcpus-only` refused the request.
    #[error(transparent)]
    SmtAlignment(#[from] SmtAlignmentError),
    /// Assignment failed.
    #[error(transparent)]
    Take(#[from] TakeError),
    /// A pod managed at pod level whose spec leaves containers without CPUs (upstream's
    /// `EmptyPodSharedPoolError`, with its message).
    #[error(transparent)]
    EmptyPodSharedPool(#[from] EmptyPodSharedPoolError),
}

/// Why a pod managed at pod level leaves a container without CPUs (upstream
/// `validatePodScopeResources`'s messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmptyPodSharedPoolError {
    /// An init container that is not a sidecar asks for more exclusive CPUs than the pod's
    /// budget has beside the sidecars before it.
    #[error(
        "pod rejected, largest exclusive init container requests {requested} cpus, but only {available} available"
    )]
    InitContainerTooLarge {
        /// The exclusive CPUs it asks for.
        requested: usize,
        /// The budget less the sidecars' exclusive CPUs.
        available: usize,
    },
    /// A shared init container, with the budget all taken by sidecars.
    #[error("pod rejected, pod has shared init containers but no cpus available for them")]
    NoCpusForSharedInitContainers,
    /// A shared container, with the budget all taken by exclusive ones.
    #[error(
        "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers"
    )]
    NoCpusForSharedContainers,
}

/// Upstream's reason for [`AllocateError::EmptyPodSharedPool`].
pub const EMPTY_POD_SHARED_POOL_ERROR: &str = "EmptyPodSharedPoolError";

impl From<AllocateError> for AllocationError {
    fn from(e: AllocateError) -> Self {
        match e {
            AllocateError::SmtAlignment(smt) => AllocationError::Admission {
                reason: SMT_ALIGNMENT_ERROR.to_owned(),
                message: smt.to_string(),
            },
            AllocateError::EmptyPodSharedPool(why) => AllocationError::Admission {
                reason: EMPTY_POD_SHARED_POOL_ERROR.to_owned(),
                message: why.to_string(),
            },
            other => AllocationError::unexpected(other),
        }
    }
}

/// Why the static policy refuses a restored state (upstream `validateState`'s messages;
/// [`ValidationError::CrossPodOverlap`] is corral's extra check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// Assignments without a shared pool.
    #[error("default cpuset cannot be empty")]
    EmptyDefaultSet,
    /// Strictly reserved CPUs in the shared pool.
    #[error(
        "some of strictly reserved cpus: \"{reserved}\" are present in defaultCpuSet: \"{default}\""
    )]
    StrictReservedInDefault {
        /// The reserved CPUs found in the pool.
        reserved: String,
        /// The pool.
        default: String,
    },
    /// Reserved CPUs missing from the shared pool (e.g. the reservation grew).
    #[error("not all reserved cpus: \"{reserved}\" are present in defaultCpuSet: \"{default}\"")]
    ReservedNotInDefault {
        /// The reserved CPUs.
        reserved: String,
        /// The pool.
        default: String,
    },
    /// An exclusive assignment overlapping the shared pool.
    #[error(
        "pod: {pod}, container: {container} cpuset: \"{cpus}\" overlaps with default cpuset \"{default}\""
    )]
    OverlapsDefault {
        /// Pod UID.
        pod: String,
        /// Container name.
        container: String,
        /// Its CPUs (list format).
        cpus: String,
        /// The pool.
        default: String,
    },
    /// corral: two pods' exclusive assignments overlap (upstream does not check).
    #[error(
        "CPU {cpu} is assigned exclusively to both pod: {pod}, container: {container} and pod: {other_pod}, container: {other_container}"
    )]
    CrossPodOverlap {
        /// The CPU assigned twice.
        cpu: usize,
        /// Pod UID.
        pod: String,
        /// Container name.
        container: String,
        /// The other pod.
        other_pod: String,
        /// The other container.
        other_container: String,
    },
    /// The CPUs of the state differ from the machine's (CPUs offlined or added).
    #[error(
        "current set of available CPUs \"{machine}\" doesn't match with CPUs in state \"{state}\""
    )]
    CpusChanged {
        /// The machine's CPUs (minus strictly reserved).
        machine: String,
        /// The CPUs the state knows.
        state: String,
    },
}

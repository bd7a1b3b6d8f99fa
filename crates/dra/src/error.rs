//! The crate's error type: every way preparing, unpreparing, looking up or checkpointing DRA
//! claims can fail, each naming the pod, claim and driver involved.

use std::path::PathBuf;
use std::time::Duration;

/// Why a DRA manager operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DraManagerError {
    /// The pod lists a resource claim the caller did not supply.
    #[error("pod {pod} ({pod_uid}): resource claim {claim} was not supplied")]
    ClaimNotSupplied {
        /// The pod, `namespace/name`.
        pod: String,
        /// The pod's uid.
        pod_uid: String,
        /// The claim, `namespace/name`.
        claim: String,
    },
    /// The claim has no allocation result: the scheduler did not allocate it.
    #[error("resource claim {claim} ({claim_uid}) is not allocated")]
    NotAllocated {
        /// The claim, `namespace/name`.
        claim: String,
        /// The claim's uid.
        claim_uid: String,
    },
    /// The pod is not in the claim's `reservedFor` list.
    #[error(
        "pod {pod} ({pod_uid}) is not allowed to use resource claim {claim} ({claim_uid}): not in its reservedFor list"
    )]
    NotReserved {
        /// The pod, `namespace/name`.
        pod: String,
        /// The pod's uid.
        pod_uid: String,
        /// The claim, `namespace/name`.
        claim: String,
        /// The claim's uid.
        claim_uid: String,
    },
    /// The cache holds a claim of this name whose uid differs from the one supplied: the
    /// claim was deleted and re-created while the old one is still prepared.
    #[error(
        "resource claim {claim}: cached uid {cached_uid} differs from supplied uid {supplied_uid}; the old claim must be unprepared first"
    )]
    ClaimUidMismatch {
        /// The claim, `namespace/name`.
        claim: String,
        /// The uid in the cache.
        cached_uid: String,
        /// The uid the caller supplied.
        supplied_uid: String,
    },
    /// A template-generated pod claim has no generated claim name in the pod status.
    #[error("pod {pod}: no generated resource claim name for pod claim {pod_claim}")]
    NoGeneratedName {
        /// The pod, `namespace/name`.
        pod: String,
        /// The pod-level claim name.
        pod_claim: String,
    },
    /// A pod claim names neither a claim nor a template.
    #[error("pod {pod}: pod claim {pod_claim} names neither a resource claim nor a template")]
    InvalidPodClaim {
        /// The pod, `namespace/name`.
        pod: String,
        /// The pod-level claim name.
        pod_claim: String,
    },
    /// A container refers to a claim that is not in the cache.
    #[error(
        "pod {pod}, container {container}: resource claim {claim} is not prepared on this node"
    )]
    ClaimNotCached {
        /// The pod, `namespace/name`.
        pod: String,
        /// The container.
        container: String,
        /// The claim, `namespace/name`.
        claim: String,
    },
    /// No plugin of this driver is registered.
    #[error(
        "DRA driver {driver} is not registered (needed by resource claim {claim} of pod {pod})"
    )]
    DriverNotRegistered {
        /// The driver name.
        driver: String,
        /// The pod, `namespace/name`, or its uid when only that is known.
        pod: String,
        /// The first claim that needs the driver, `namespace/name`.
        claim: String,
    },
    /// The driver call itself failed (transport error, gRPC status, deadline).
    #[error("{call} of DRA driver {driver} for pod {pod} failed (claims {claims})")]
    DriverCall {
        /// `NodePrepareResources` or `NodeUnprepareResources`.
        call: &'static str,
        /// The driver name.
        driver: String,
        /// The pod, `namespace/name`, or its uid.
        pod: String,
        /// The claims sent, `namespace/name` comma-separated.
        claims: String,
        /// What went wrong.
        source: DriverCallError,
    },
    /// The driver reported an error for one claim.
    #[error(
        "{call} of DRA driver {driver} failed for resource claim {claim} of pod {pod}: {message}"
    )]
    ClaimFailed {
        /// `NodePrepareResources` or `NodeUnprepareResources`.
        call: &'static str,
        /// The driver name.
        driver: String,
        /// The pod, `namespace/name`, or its uid.
        pod: String,
        /// The claim, `namespace/name`.
        claim: String,
        /// The driver's message.
        message: String,
    },
    /// The driver answered for a claim uid it was not asked about. The message is
    /// upstream's exact text (v1.36 `manager.go`: `"NodePrepareResources returned result for
    /// unknown claim UID %s"`, the same for NodeUnprepareResources; tests assert it); the
    /// driver and pod are in the source.
    #[error("{call} returned result for unknown claim UID {claim_uid}")]
    UnknownClaimInResponse {
        /// `NodePrepareResources` or `NodeUnprepareResources`.
        call: &'static str,
        /// The uid nobody asked about.
        claim_uid: String,
        /// Whose answer it was.
        #[source]
        detail: DriverAnswer,
    },
    /// The driver's answer has no entry for some claims it was asked about. The message is
    /// upstream's exact text (v1.36 `manager.go`: `"NodePrepareResources skipped %d
    /// ResourceClaims"`, the same for NodeUnprepareResources; tests assert it); which claims,
    /// the driver and the pod are in the source.
    #[error("{call} skipped {skipped} ResourceClaims")]
    ClaimsSkipped {
        /// `NodePrepareResources` or `NodeUnprepareResources`.
        call: &'static str,
        /// How many claims have no entry.
        skipped: usize,
        /// The claims without an entry, and whose answer it was.
        #[source]
        detail: SkippedClaims,
    },
    /// A CDI annotation could not be generated (bad driver name, claim uid or device id).
    #[error("CDI annotation for DRA driver {driver}, resource claim {claim}")]
    CdiAnnotation {
        /// The driver name (or annotation key).
        driver: String,
        /// The claim, `namespace/name`.
        claim: String,
        /// What is invalid.
        #[source]
        source: crate::cdi::CdiError,
    },
    /// Reading or writing `dra_manager_state` failed.
    #[error("DRA checkpoint {}", path.display())]
    Checkpoint {
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        source: corral_checkpoint::CheckpointError,
    },
    /// A configured crash point was reached (fault injection for tests, feature
    /// `test-util`): the manager stopped as a killed process would, and refuses every
    /// further call.
    #[cfg(feature = "test-util")]
    #[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
    #[error("injected crash at {0:?}: this manager is dead, restart it from its state directory")]
    Crashed(crate::crash_point::CrashPoint),
}

/// Whose answer to a DRA call an error is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("in the answer of DRA driver {driver} for pod {pod}")]
pub struct DriverAnswer {
    /// The driver name.
    pub driver: String,
    /// The pod, `namespace/name`, or its uid.
    pub pod: String,
}

/// The claims a DRA driver's answer has no entry for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DRA driver {driver} gave no answer for resource claims {} of pod {pod}", claims.join(", "))]
pub struct SkippedClaims {
    /// The driver name.
    pub driver: String,
    /// The pod, `namespace/name`, or its uid.
    pub pod: String,
    /// The claims without an entry, in request order, each `namespace/name (uid)`.
    pub claims: Vec<String>,
}

/// Why one call to a DRA driver failed as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverCallError {
    /// The driver has no registered plugin.
    #[error("driver is not registered")]
    NotRegistered,
    /// The call did not finish within its deadline.
    #[error("no answer within {0:?}")]
    DeadlineExceeded(Duration),
    /// The driver answered with a gRPC error status.
    #[error("gRPC status {code:?}: {message}")]
    Status {
        /// The status code.
        code: corral_proto::tonic::Code,
        /// The status message.
        message: String,
    },
    /// The driver's socket could not be dialed.
    #[error("cannot connect")]
    Connect(#[source] Box<corral_proto::uds::UdsError>),
    /// Any other failure (used by fakes and test drivers).
    #[error("{0}")]
    Other(String),
}

impl From<corral_proto::tonic::Status> for DriverCallError {
    fn from(status: corral_proto::tonic::Status) -> Self {
        DriverCallError::Status {
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}

//! A ResourceClaim → what the DRA manager needs: the claim's identity, its allocation (per
//! request: driver, pool, device, share) and who may use it (`reservedFor`). Without an API
//! server, the caller supplies these; corral never invents them.
//!
//! Claims are read in every version clusters of 1.32–1.36 serve — `resource.k8s.io/v1`
//! (GA in 1.34), `v1beta2` (1.33) and `v1beta1` (1.32) — each checked against its own
//! schema, then carried as v1: the fields corral reads (`metadata`, `status.allocation`,
//! `status.reservedFor`) have one shape in all three.

use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;
use k8s_openapi::api::resource::{v1beta1, v1beta2};

/// The ResourceClaim `apiVersion`s read, newest first.
pub(crate) const CLAIM_API_VERSIONS: [&str; 3] = [
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
];

/// Why a ResourceClaim document cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimDocumentError {
    /// It does not fit its version's schema.
    #[error("not a {api_version} ResourceClaim: {misfit}")]
    NotFitting {
        /// Its `apiVersion`.
        api_version: String,
        /// What does not fit (shown in the message, which is all its callers pass on).
        misfit: serde_json::Error,
    },
    /// Its version is not one corral reads.
    #[error(
        "apiVersion {api_version:?} is not one corral reads ResourceClaims in ({})",
        CLAIM_API_VERSIONS.join(", ")
    )]
    UnknownVersion {
        /// Its `apiVersion`.
        api_version: String,
    },
}

/// A ResourceClaim document (`apiVersion` one of [`CLAIM_API_VERSIONS`]) as v1; `Err` says
/// what does not fit that version's schema, or that the version is not read.
pub(crate) fn claim_from_document(
    document: serde_json::Value,
) -> Result<K8sResourceClaim, ClaimDocumentError> {
    let api_version = document
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned();
    let not_fitting = |misfit| ClaimDocumentError::NotFitting {
        api_version: api_version.clone(),
        misfit,
    };
    // An older version: checked against its schema, then its metadata and status as v1's.
    let as_v1 = |metadata, status: serde_json::Result<serde_json::Value>| {
        let status = status
            .and_then(serde_json::from_value)
            .map_err(not_fitting)?;
        Ok(K8sResourceClaim {
            metadata,
            status,
            ..K8sResourceClaim::default()
        })
    };
    match api_version.as_str() {
        "resource.k8s.io/v1" => serde_json::from_value(document).map_err(not_fitting),
        "resource.k8s.io/v1beta2" => {
            let claim: v1beta2::ResourceClaim =
                serde_json::from_value(document).map_err(not_fitting)?;
            as_v1(claim.metadata, serde_json::to_value(claim.status))
        }
        "resource.k8s.io/v1beta1" => {
            let claim: v1beta1::ResourceClaim =
                serde_json::from_value(document).map_err(not_fitting)?;
            as_v1(claim.metadata, serde_json::to_value(claim.status))
        }
        other => Err(ClaimDocumentError::UnknownVersion {
            api_version: other.to_owned(),
        }),
    }
}

/// Why a ResourceClaim is not one corral can prepare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClaimError {
    /// No `metadata.name`.
    #[error("a ResourceClaim has no metadata.name")]
    NoName,
    /// No (or an empty) `metadata.uid`.
    #[error("ResourceClaim {namespace}/{name} has no metadata.uid")]
    NoUid {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// No `status.allocation`: no scheduler here allocates it.
    #[error(
        "ResourceClaim {namespace}/{name} has no status.allocation: corral prepares only allocated claims"
    )]
    NotAllocated {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// One allocated device of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AllocatedDevice {
    /// The claim's request this device satisfies.
    pub(crate) request: String,
    /// The DRA driver.
    pub(crate) driver: String,
    /// The driver's pool.
    pub(crate) pool: String,
    /// The device within the pool.
    pub(crate) device: String,
    /// For a shared device, which share.
    pub(crate) share_id: Option<String>,
}

/// One entry of `status.reservedFor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimConsumer {
    /// The consumer's resource ("pods").
    pub(crate) resource: String,
    /// Its name.
    pub(crate) name: String,
    /// Its uid.
    pub(crate) uid: String,
}

/// An allocated ResourceClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimManifest {
    /// `metadata.namespace` (default "default").
    pub(crate) namespace: String,
    /// `metadata.name`.
    pub(crate) name: String,
    /// `metadata.uid`.
    pub(crate) uid: String,
    /// `status.allocation.devices.results`.
    pub(crate) devices: Vec<AllocatedDevice>,
    /// `status.reservedFor`.
    pub(crate) reserved_for: Vec<ClaimConsumer>,
}

impl ClaimManifest {
    /// Read an allocated claim; a claim without a name, a uid or an allocation is refused
    /// (no scheduler here allocates it).
    pub(crate) fn from_k8s(claim: &K8sResourceClaim) -> Result<Self, ClaimError> {
        let name = claim.metadata.name.clone().ok_or(ClaimError::NoName)?;
        let namespace = claim
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let uid = claim
            .metadata
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ClaimError::NoUid {
                namespace: namespace.clone(),
                name: name.clone(),
            })?;
        let status = claim.status.clone().unwrap_or_default();
        let allocation = status.allocation.ok_or_else(|| ClaimError::NotAllocated {
            namespace: namespace.clone(),
            name: name.clone(),
        })?;
        let devices = allocation
            .devices
            .and_then(|d| d.results)
            .unwrap_or_default()
            .into_iter()
            .map(|r| AllocatedDevice {
                request: r.request,
                driver: r.driver,
                pool: r.pool,
                device: r.device,
                share_id: r.share_id,
            })
            .collect();
        let reserved_for = status
            .reserved_for
            .unwrap_or_default()
            .into_iter()
            .map(|r| ClaimConsumer {
                resource: r.resource,
                name: r.name,
                uid: r.uid,
            })
            .collect();
        Ok(Self {
            namespace,
            name,
            uid,
            devices,
            reserved_for,
        })
    }
}

//! A `resource.k8s.io/v1` ResourceClaim → what the DRA manager needs: the claim's identity,
//! its allocation (per request: driver, pool, device) and who may use it (`reservedFor`).
//! Without an API server, the caller supplies these; corral never invents them.

use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

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
    pub(crate) fn from_k8s(claim: &K8sResourceClaim) -> Result<Self, String> {
        let name = claim
            .metadata
            .name
            .clone()
            .ok_or("a ResourceClaim has no metadata.name")?;
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
            .ok_or_else(|| format!("ResourceClaim {namespace}/{name} has no metadata.uid"))?;
        let status = claim.status.clone().unwrap_or_default();
        let allocation = status.allocation.ok_or_else(|| {
            format!("ResourceClaim {namespace}/{name} has no status.allocation: corral prepares only allocated claims")
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

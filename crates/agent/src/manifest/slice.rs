//! A ResourceSlice → which NUMA node each of its devices sits on, from the standard device
//! attribute `resource.kubernetes.io/numaNode` (KEP-6072, GA in v1.37). The kubelet's
//! topology manager ignores DRA devices (kubernetes/website#56761); corral's admission API
//! and CLI take the slices that describe a pod's allocated devices beside its claims, so
//! CPUs and memory align with DRA devices as they do with device-plugin devices.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{ResourceClaim as K8sResourceClaim, ResourceSlice};

/// The only `apiVersion` ResourceSlices are read in (`resource.k8s.io/v1`, GA in 1.34).
pub(crate) const SLICE_API_VERSION: &str = "resource.k8s.io/v1";

/// The standard attribute naming a device's NUMA node.
pub(crate) const NUMA_NODE_ATTRIBUTE: &str = "resource.kubernetes.io/numaNode";

/// Why a ResourceSlice document cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SliceDocumentError {
    /// It does not fit the v1 schema.
    #[error("not a {SLICE_API_VERSION} ResourceSlice: {0}")]
    NotFitting(serde_json::Error),
    /// Its version is not `resource.k8s.io/v1`.
    #[error("apiVersion {0:?} is not one corral reads ResourceSlices in ({SLICE_API_VERSION})")]
    UnknownVersion(String),
}

/// A ResourceSlice document (`resource.k8s.io/v1`).
pub(crate) fn slice_from_document(
    document: serde_json::Value,
) -> Result<ResourceSlice, SliceDocumentError> {
    let api_version = document
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    if api_version != SLICE_API_VERSION {
        return Err(SliceDocumentError::UnknownVersion(api_version.to_owned()));
    }
    serde_json::from_value(document).map_err(SliceDocumentError::NotFitting)
}

/// A device as a claim's allocation names it: driver, pool, device.
type DeviceKey = (String, String, String);

/// The NUMA node of every device the slices describe with `numaNode` (an integer ≥ 0).
pub(crate) fn device_numa_nodes(slices: &[ResourceSlice]) -> BTreeMap<DeviceKey, usize> {
    let mut nodes = BTreeMap::new();
    for slice in slices {
        let spec = &slice.spec;
        for device in spec.devices.iter().flatten() {
            let numa = device
                .attributes
                .as_ref()
                .and_then(|attributes| attributes.get(NUMA_NODE_ATTRIBUTE))
                .and_then(|attribute| attribute.int)
                .and_then(|id| usize::try_from(id).ok());
            if let Some(numa) = numa {
                let key = (
                    spec.driver.clone(),
                    spec.pool.name.clone(),
                    device.name.clone(),
                );
                nodes.insert(key, numa);
            }
        }
    }
    nodes
}

/// Per claim name, per allocated request, the NUMA nodes of its devices that a slice
/// places (devices no slice places are left out: they constrain nothing, as upstream).
pub(crate) fn claim_numa_nodes(
    claims: &[K8sResourceClaim],
    slices: &[ResourceSlice],
) -> BTreeMap<String, Vec<(String, usize)>> {
    let placed = device_numa_nodes(slices);
    let mut by_claim = BTreeMap::new();
    if placed.is_empty() {
        return by_claim;
    }
    for claim in claims {
        let Some(name) = &claim.metadata.name else {
            continue;
        };
        let results = claim
            .status
            .as_ref()
            .and_then(|status| status.allocation.as_ref())
            .and_then(|allocation| allocation.devices.as_ref())
            .and_then(|devices| devices.results.as_deref())
            .unwrap_or_default();
        let nodes: Vec<(String, usize)> = results
            .iter()
            .filter_map(|result| {
                let key = (
                    result.driver.clone(),
                    result.pool.clone(),
                    result.device.clone(),
                );
                placed.get(&key).map(|numa| (result.request.clone(), *numa))
            })
            .collect();
        if !nodes.is_empty() {
            by_claim.insert(name.clone(), nodes);
        }
    }
    by_claim
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(api_version: &str, numa: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": api_version, "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "d", "nodeName": "n",
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "dev", "attributes": {NUMA_NODE_ATTRIBUTE: numa}}],
            },
        })
    }

    #[test]
    fn only_v1_integer_numa_nodes_place_devices() {
        let slice = slice_from_document(document(SLICE_API_VERSION, serde_json::json!({"int": 3})))
            .unwrap();
        let key = ("d".to_owned(), "p".to_owned(), "dev".to_owned());
        assert_eq!(device_numa_nodes(&[slice])[&key], 3);
        // A negative or non-integer value places nothing.
        for numa in [
            serde_json::json!({"int": -1}),
            serde_json::json!({"string": "1"}),
        ] {
            let slice = slice_from_document(document(SLICE_API_VERSION, numa)).unwrap();
            assert!(device_numa_nodes(&[slice]).is_empty());
        }
        let err = slice_from_document(document("resource.k8s.io/v1beta2", serde_json::json!({})))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "apiVersion \"resource.k8s.io/v1beta2\" is not one corral reads ResourceSlices in (resource.k8s.io/v1)"
        );
        let mut bad = document(SLICE_API_VERSION, serde_json::json!({"int": 1}));
        bad["spec"]["devices"] = serde_json::json!("not a list");
        assert!(
            slice_from_document(bad)
                .unwrap_err()
                .to_string()
                .starts_with("not a resource.k8s.io/v1 ResourceSlice: ")
        );
    }
}

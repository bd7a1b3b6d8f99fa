//! Extended resources backed by DRA (KEP-5004, `DRAExtendedResource`, beta in v1.36): the
//! scheduler allocates a container's extended resource (`example.com/gpu`, or
//! `deviceclass.resource.kubernetes.io/<class>`) through a ResourceClaim it generates and
//! records it in the pod's `status.extendedResourceClaimStatus`: the claim's name and, per
//! container and resource, the claim's request that holds the devices.
//!
//! The kubelet (v1.36 `pkg/kubelet/cm/dra/manager.go`) then prepares that claim with the
//! pod's own claims, and gives a container the CDI devices of the requests mapped to the
//! resources it requests (non-zero, `IsDRAExtendedResourceName`). corral reads the status
//! into its pod vocabulary: the claim becomes one of the pod's claims, each mapped request
//! one of the container's claims, and the mapped resource leaves the container's requests
//! and limits, so the device manager is never asked for it.

use k8s_openapi::api::core::v1::Pod as K8sPod;

use corral_topology::{ContainerClaim, Pod, PodResourceClaim};

/// Upstream `resourceapi.ResourceDeviceClassPrefix`: the implicit extended resource name of
/// a device class.
const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Upstream `schedutil.IsDRAExtendedResourceName`: an extended resource name
/// (`v1helper.IsExtendedResourceName`: a domain-prefixed name outside `kubernetes.io`, not
/// a quota `requests.` name) or a device class's implicit name.
pub(crate) fn is_dra_extended_resource_name(name: &str) -> bool {
    let extended =
        name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.");
    extended || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// Apply `manifest`'s `status.extendedResourceClaimStatus` to `pod` (converted from it).
/// `Err` names the field that is wrong.
pub(crate) fn apply(pod: &mut Pod, manifest: &K8sPod) -> Result<(), (String, String)> {
    let Some(status) = manifest
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.as_ref())
    else {
        return Ok(());
    };
    let field = "status.extendedResourceClaimStatus";
    let claim = status.resource_claim_name.clone();
    if claim.is_empty() {
        return Err((
            format!("{field}.resourceClaimName"),
            "Required value".into(),
        ));
    }
    if pod.resource_claims.iter().any(|c| c.name == claim) {
        return Err((
            format!("{field}.resourceClaimName"),
            format!("{claim:?} is also the name of one of spec.resourceClaims"),
        ));
    }
    for (i, mapping) in status.request_mappings.iter().enumerate() {
        if !pod
            .all_containers()
            .any(|(_, c)| c.name == mapping.container_name)
        {
            return Err((
                format!("{field}.requestMappings[{i}].containerName"),
                format!("no container {:?} in the pod", mapping.container_name),
            ));
        }
    }
    pod.resource_claims.push(PodResourceClaim {
        name: claim.clone(),
        resource_claim_name: Some(claim.clone()),
        resource_claim_template_name: None,
    });
    for container in pod.init_containers.iter_mut().chain(&mut pod.containers) {
        let requested: Vec<String> = container
            .resources
            .requests
            .extended
            .iter()
            .filter(|(name, amount)| **amount != 0 && is_dra_extended_resource_name(name))
            .map(|(name, _)| name.clone())
            .collect();
        for resource in requested {
            let mapped: Vec<&str> = status
                .request_mappings
                .iter()
                .filter(|m| m.container_name == container.name && m.resource_name == resource)
                .map(|m| m.request_name.as_str())
                .collect();
            if mapped.is_empty() {
                continue;
            }
            for request in mapped {
                container.claims.push(ContainerClaim {
                    name: claim.clone(),
                    request: Some(request.to_owned()),
                });
            }
            container.resources.requests.extended.remove(&resource);
            container.resources.limits.extended.remove(&resource);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dra_extended_resource_names_are_upstreams() {
        for name in [
            "example.com/gpu",
            "deviceclass.resource.kubernetes.io/gpu.example.com",
        ] {
            assert!(is_dra_extended_resource_name(name), "{name}");
        }
        for name in [
            "cpu",
            "memory",
            "hugepages-2Mi",
            "kubernetes.io/something",
            "example.kubernetes.io/x",
            "requests.example.com/gpu",
        ] {
            assert!(!is_dra_extended_resource_name(name), "{name}");
        }
    }
}

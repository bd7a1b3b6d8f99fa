//! What a container gets from its claims (upstream `GetResources`,
//! `GetContainerClaimInfos`): read from the cache, never waiting for a driver.

use std::collections::BTreeMap;

use corral_topology::Container;

use super::DraManager;
use crate::cdi;
use crate::claim::{PodClaims, claim_key};
use crate::claim_cache::ClaimInfoCache;
use crate::claim_info::ClaimInfo;
use crate::error::DraManagerError;

/// What a container gets from its claims.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Fully qualified CDI device ids, in the order of the pod's claims.
    pub cdi_devices: Vec<String>,
    /// CDI annotations, when [`DraManagerConfig::cdi_annotations`](super::DraManagerConfig::cdi_annotations) is set.
    pub annotations: BTreeMap<String, String>,
}

impl<D> DraManager<D> {
    /// The CDI devices (and, if configured, annotations) of the container's claims: for
    /// each pod claim the container names, the devices of the request it names, or of the
    /// whole claim (upstream `GetResources`).
    pub fn get_resources(
        &self,
        pod: &PodClaims,
        container: &Container,
    ) -> Result<ContainerInfo, DraManagerError> {
        let inner = self.lock();
        inner.alive()?;
        let mut out = ContainerInfo::default();
        let mut annotated: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (info, request) in used_claims(&inner.cache, pod, container)? {
            out.cdi_devices.extend(info.cdi_devices(request));
            if !self.config.cdi_annotations {
                continue;
            }
            for (driver, ids) in info.cdi_devices_by_driver(request) {
                let key = cdi::annotation_key(&driver, info.uid()).map_err(|source| {
                    DraManagerError::CdiAnnotation {
                        driver: driver.clone(),
                        claim: claim_key(info.namespace(), info.name()),
                        source,
                    }
                })?;
                let entry = annotated.entry(key).or_default();
                for id in ids {
                    if !entry.contains(&id) {
                        entry.push(id);
                    }
                }
            }
        }
        for (key, ids) in annotated {
            let value =
                cdi::annotation_value(&ids).map_err(|source| DraManagerError::CdiAnnotation {
                    driver: key.clone(),
                    claim: key.clone(),
                    source,
                })?;
            out.annotations.insert(key, value);
        }
        Ok(out)
    }

    /// Copies of the cached claims a container uses (upstream `GetContainerClaimInfos`).
    pub fn container_claim_infos(
        &self,
        pod: &PodClaims,
        container: &Container,
    ) -> Result<Vec<ClaimInfo>, DraManagerError> {
        let inner = self.lock();
        Ok(used_claims(&inner.cache, pod, container)?
            .into_iter()
            .map(|(info, _)| info.clone())
            .collect())
    }
}

/// Each use the container makes of a pod claim, in the pod's claim order: the cached claim
/// and the request it names (`None`: the whole claim). A used claim must be cached.
fn used_claims<'a>(
    cache: &'a ClaimInfoCache,
    pod: &PodClaims,
    container: &'a Container,
) -> Result<Vec<(&'a ClaimInfo, Option<&'a str>)>, DraManagerError> {
    let mut out = Vec::new();
    for pod_claim in &pod.claims {
        let Some(claim_name) = &pod_claim.claim_name else {
            continue;
        };
        for used in container.claims.iter().filter(|c| c.name == pod_claim.name) {
            let info = cache.get(claim_name, &pod.namespace).ok_or_else(|| {
                DraManagerError::ClaimNotCached {
                    pod: pod.display_name(),
                    container: container.name.clone(),
                    claim: claim_key(&pod.namespace, claim_name),
                }
            })?;
            out.push((info, used.request.as_deref()));
        }
    }
    Ok(out)
}

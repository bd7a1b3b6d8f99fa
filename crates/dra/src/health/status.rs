//! The DRA part of a container's `allocatedResourcesStatus` (upstream
//! `Manager.UpdateAllocatedResourcesStatus`, KEP-4680).

use std::time::SystemTime;

use corral_topology::Container;

use super::cache::{DeviceHealthStatus, HealthCache};
use crate::claim::PodClaims;
use crate::manager::DraManager;

/// One claim use of a container and its devices' health (`v1.ResourceStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimHealthStatus {
    /// `claim:<podClaim>`, or `claim:<podClaim>/<request>` when the container names a
    /// request.
    pub name: String,
    /// Every device every driver prepared for the claim (not only the request's, as
    /// upstream).
    pub devices: Vec<ClaimDeviceHealth>,
}

/// One device's health (`v1.ResourceHealth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimDeviceHealth {
    /// The device's first CDI id, else `<driver>/<pool>/<device>`.
    pub resource_id: String,
    /// Its health now.
    pub health: DeviceHealthStatus,
    /// The driver's message, when one came with the report that holds.
    pub message: Option<String>,
}

impl<D: crate::driver::DriverClients> DraManager<D> {
    /// The health of the devices `container` gets from its claims, one entry per claim it
    /// names (in its order), skipping claims not prepared here and claims without devices.
    /// Upstream fills this only for app containers; the caller decides which to ask about.
    pub fn container_health(
        &self,
        pod: &PodClaims,
        container: &Container,
        cache: &HealthCache,
        now: SystemTime,
    ) -> Vec<ClaimHealthStatus> {
        let mut out = Vec::new();
        for used in &container.claims {
            let Some(claim_name) = pod
                .claims
                .iter()
                .find(|c| c.name == used.name)
                .and_then(|c| c.claim_name.as_deref())
            else {
                continue;
            };
            let Some(info) = self.claim_info(&pod.namespace, claim_name) else {
                continue;
            };
            let mut devices = Vec::new();
            for driver in info.drivers() {
                for device in info.devices(driver) {
                    let now = cache.health(driver, &device.pool_name, &device.device_name, now);
                    devices.push(ClaimDeviceHealth {
                        resource_id: device.cdi_device_ids.first().cloned().unwrap_or_else(|| {
                            format!("{driver}/{}/{}", device.pool_name, device.device_name)
                        }),
                        health: now.health,
                        message: now.message,
                    });
                }
            }
            if devices.is_empty() {
                continue;
            }
            let name = match &used.request {
                Some(request) if !request.is_empty() => format!("claim:{}/{request}", used.name),
                _ => format!("claim:{}", used.name),
            };
            out.push(ClaimHealthStatus { name, devices });
        }
        out
    }
}

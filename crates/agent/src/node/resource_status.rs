//! The health of what a container holds, as the kubelet puts it in a container status'
//! `allocatedResourcesStatus` (KEP-4680, `ResourceHealthStatus`): one entry per
//! device-plugin resource (`UpdateAllocatedResourcesStatus` of v1.36's device manager),
//! each device with the health its plugin last reported, then one per DRA claim the
//! container names (the DRA manager's `UpdateAllocatedResourcesStatus`), each device with
//! the health its driver's stream last reported (`Unknown` once that report timed out).
//! Nothing when the gate is off.

use std::time::SystemTime;

use corral_topology::Container;
use serde::Serialize;

use super::Node;

/// One resource's devices and their health (`v1.ResourceStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResourceStatusView {
    /// The resource (`example.com/gpu`), or for DRA `claim:<podClaim>[/<request>]`.
    pub(crate) name: String,
    /// Its devices.
    pub(crate) resources: Vec<ResourceHealthView>,
}

/// One device's health (`v1.ResourceHealth`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResourceHealthView {
    /// The device id (`v1.ResourceID`): a plugin's device id, or for DRA the first CDI
    /// device id, else `<driver>/<pool>/<device>`.
    pub(crate) resource_id: String,
    /// `Healthy`, `Unhealthy` or `Unknown`.
    pub(crate) health: &'static str,
    /// A DRA driver's message (with `ResourceHealthStatusMessage`).
    pub(crate) message: Option<String>,
}

/// `v1.ResourceHealthStatus` of a device plugin's `Healthy`/`Unhealthy`.
fn plugin_health(healthy: bool) -> &'static str {
    if healthy { "Healthy" } else { "Unhealthy" }
}

impl Node {
    /// `container`'s `allocatedResourcesStatus`: its device-plugin resources, then its DRA
    /// claims; empty when `ResourceHealthStatus` is off.
    pub(crate) fn allocated_resources_status(
        &self,
        pod_uid: &str,
        claims: Option<&corral_dra::PodClaims>,
        container: &Container,
    ) -> Vec<ResourceStatusView> {
        let Some(health) = &self.health else {
            return Vec::new();
        };
        let mut out = self.device_plugin_status(pod_uid, &container.name);
        let Some(claims) = claims.filter(|_| !container.claims.is_empty()) else {
            return out;
        };
        let now = SystemTime::now();
        for status in self
            .dra
            .container_health(claims, container, health.monitor.cache(), now)
        {
            out.push(ResourceStatusView {
                name: status.name,
                resources: status
                    .devices
                    .into_iter()
                    .map(|d| ResourceHealthView {
                        resource_id: d.resource_id,
                        health: d.health.as_str(),
                        message: d.message.filter(|_| health.messages),
                    })
                    .collect(),
            });
        }
        out
    }

    /// The device-plugin part of `container`'s `allocatedResourcesStatus`: every resource
    /// it holds, in resource order, its devices by id. Only app containers have one (upstream
    /// fills `status.containerStatuses`, not the init containers' statuses).
    pub(crate) fn device_plugin_status(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Vec<ResourceStatusView> {
        self.devices
            .container_devices(pod_uid, container)
            .into_iter()
            .map(|(resource, allocation)| {
                let resources = allocation
                    .device_ids()
                    .into_iter()
                    .map(|id| ResourceHealthView {
                        resource_id: id.clone(),
                        health: plugin_health(self.devices.device_healthy(&resource, &id)),
                        message: None,
                    })
                    .collect();
                ResourceStatusView {
                    name: resource,
                    resources,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use corral_devicemgr::sample::{SampleConfig, SamplePlugin};

    use super::super::tests::{admitted, started};

    const GPU: &str = "example.com/gpu";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_device_that_turns_unhealthy_shows_for_the_container_holding_it() {
        let (dir, _config, node) =
            started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
        let socket = dir.path().join("device-plugins/gpu.sock");
        let plugin = SamplePlugin::start(SampleConfig::new(GPU, socket, 2, &[0]))
            .await
            .unwrap();
        plugin
            .register(&node.devices().socket_path())
            .await
            .unwrap();
        assert!(
            node.devices()
                .wait_for_plugin(GPU, super::super::tests::WAIT)
                .await
        );
        let pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "p"},
            "spec": {
                "initContainers": [{"name": "init", "resources": {"limits": {GPU: "1"}}}],
                "containers": [{"name": "app", "resources": {"limits": {GPU: "1"}}}],
            },
        }))
        .unwrap();
        let view = admitted(&node, pod).await;
        // Init containers have no status of this kind (upstream fills containerStatuses).
        assert!(view.containers[0].allocated_resources_status.is_empty());
        let app = &view.containers[1];
        let [status] = app.allocated_resources_status.as_slice() else {
            panic!("{app:?}");
        };
        assert_eq!(status.name, GPU);
        let [device] = status.resources.as_slice() else {
            panic!("{status:?}");
        };
        assert_eq!(device.health, "Healthy");
        let id = device.resource_id.clone();
        assert_eq!(
            app.devices[GPU].values().flatten().collect::<Vec<_>>(),
            [&id]
        );

        // The plugin reports it unhealthy: the container's status follows.
        assert!(plugin.set_health(&id, false));
        let deadline = Instant::now() + super::super::tests::WAIT;
        loop {
            let status = node.device_plugin_status("p", "app");
            if status[0].resources[0].health == "Unhealthy" {
                break;
            }
            assert!(Instant::now() < deadline, "{status:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        plugin.stop().await;
    }
}

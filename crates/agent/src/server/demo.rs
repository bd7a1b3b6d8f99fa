//! `corral run --demo-devices N`: the device manager's sample plugin, started in-process
//! and registered like any device plugin, so a newcomer sees devices allocated with NUMA
//! alignment without hardware.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use corral_devicemgr::sample::{SampleConfig, SamplePlugin};

use crate::config::AgentConfig;
use crate::node::Node;

/// The demo devices' extended resource name.
pub(crate) const DEMO_RESOURCE: &str = "example.com/gpu";
/// How long start-up waits for the in-process demo plugin's devices: generous, since a busy
/// machine (a CI runner, a laptop building) may be slow to run its first list; still bounded.
const DEMO_DEVICES_WAIT: Duration = Duration::from_secs(60);

/// Start the sample plugin with `count` devices spread round-robin over the NUMA nodes,
/// register it and wait (bounded) until the device manager lists its devices.
pub(crate) async fn start(
    node: &Arc<Node>,
    config: &AgentConfig,
    count: usize,
) -> Result<SamplePlugin> {
    let numa: Vec<i64> = node
        .cpu()
        .topology()
        .numa_node_ids()
        .iter()
        .flat_map(|&bit| node.os_numa_ids(corral_topology::NumaMask::from_u64(1 << bit)))
        .map(|id| id as i64)
        .collect();
    let socket = config.layout.device_plugins_dir().join("corral-demo.sock");
    let plugin = SamplePlugin::start(SampleConfig::new(DEMO_RESOURCE, socket, count, &numa))
        .await
        .context("starting the demo device plugin")?;
    plugin
        .register(&node.devices().socket_path())
        .await
        .map_err(|status| {
            anyhow::anyhow!("registering the demo device plugin: {}", status.message())
        })?;
    if !node
        .devices()
        .wait_for_plugin(DEMO_RESOURCE, DEMO_DEVICES_WAIT)
        .await
    {
        anyhow::bail!("the demo device plugin registered but its devices never arrived");
    }
    let nodes: Vec<String> = numa.iter().map(i64::to_string).collect();
    tracing::info!(
        resource = DEMO_RESOURCE,
        count,
        numaNodes = nodes.join(","),
        "demo devices ready"
    );
    Ok(plugin)
}

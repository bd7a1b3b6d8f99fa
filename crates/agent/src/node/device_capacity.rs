//! The kubelet asks the device manager for its capacity with every node status update
//! (`GetCapacity`, every `nodeStatusUpdateFrequency`, 10 s), which is also when a stopped
//! plugin's resource is dropped once its grace period (`devicePluginGracePeriod`) is over.
//! corral has no node status to update; [`Node::spawn_device_capacity_refresher`] asks on the
//! same period so that a dead plugin's devices leave the checkpoint, the podresources API and
//! the NodeResourceTopology as they leave a kubelet's node.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Node;

/// Upstream's default `nodeStatusUpdateFrequency`.
pub(crate) const CAPACITY_PERIOD: Duration = Duration::from_secs(10);

impl Node {
    /// Ask the device manager for its capacity every `period` until the node is dropped; a
    /// resource dropped bumps the node's changes.
    pub(crate) fn spawn_device_capacity_refresher(
        self: &Arc<Self>,
        period: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let node: Weak<Node> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(node) = node.upgrade() else { return };
                if !node.devices.capacity().removed.is_empty() {
                    node.changes.bump();
                }
            }
        })
    }
}

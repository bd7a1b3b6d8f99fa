//! NodeResourceTopology publishing (`nodeName`, `kubeconfig`): the node's NUMA zones with
//! what each has free, written to the API server after every change so that topology-aware
//! scheduling (the scheduler plugin `NodeResourceTopologyMatch`) sends pods only where the
//! topology manager will admit them.
//!
//! - `accounting`: the object, taken from the managers' state;
//! - `api`: the calls the publisher makes, behind a trait; `kube_api`: kube-rs' client;
//! - `publisher`: when to write, coalescing, retries and backoff.

mod accounting;
mod api;
mod kube_api;
mod pods_fingerprint;
mod publisher;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_accounting;
#[cfg(test)]
mod tests_adversary;
#[cfg(test)]
mod tests_adversary_accounting;
#[cfg(test)]
mod tests_fake_server;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_scheduler;

use std::sync::Arc;

use anyhow::{Context, Result};

pub(crate) use accounting::Accounting;
pub(crate) use kube_api::KubeNrtApi;
pub(crate) use publisher::{Publisher, PublisherStats};

use crate::config::{AgentConfig, NrtSettings};
use crate::node::Node;

/// Start publishing `node`'s NodeResourceTopology as `settings` say, until `stop`.
/// Fails at once only when the credentials cannot be read; an unreachable server is retried.
pub(crate) async fn spawn(
    node: Arc<Node>,
    settings: &NrtSettings,
    config: &AgentConfig,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(tokio::task::JoinHandle<()>, Arc<PublisherStats>)> {
    let api = KubeNrtApi::connect(&settings.credentials)
        .await
        .context("the API server client for NodeResourceTopology")?;
    let accounting = Accounting::new(&settings.node_name, &config.cpu_manager);
    let publisher = Publisher::new(api, accounting, settings.resync_period);
    let stats = publisher.stats();
    tracing::info!(node = %settings.node_name, resync = ?settings.resync_period,
        "publishing the NodeResourceTopology");
    Ok((tokio::spawn(publisher.run(node, stop)), stats))
}

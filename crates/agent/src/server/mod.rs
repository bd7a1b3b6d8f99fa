//! `corral run`: discover the machine, compose the managers, serve the admission API and the
//! podresources API on their unix sockets and watch the DRA plugin registry, until SIGTERM or
//! SIGINT; then stop accepting, let in-flight calls finish, remove the sockets and return.
//!
//! Every listener (metrics address, device plugin registration socket, agent socket,
//! podresources socket) is bound before "serving" is logged; a bind that fails ends `run`
//! at once with an error naming the address.

mod agent_api;
mod cri;
mod demo;
mod health;
mod http;
mod metrics;
mod nri;
mod podresources;
#[cfg(test)]
mod tests_settled;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use corral_proto::corral::v1::agent_server::AgentServer;
use corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesListerServer;
use corral_proto::uds::{ServeOptions, SocketOptions, UdsListener, serve_with};
use tokio::sync::watch;

use crate::config::{AgentConfig, NriMode};
use crate::node::{NoRuntime, Node};

/// How long in-flight calls may take after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Run the agent until a signal asks it to stop.
pub(crate) async fn run(config: AgentConfig, demo_devices: usize) -> Result<()> {
    // First, so that a taken port fails before anything is touched; served at once, so
    // the probes answer while the state is restored.
    let metrics_listener = match config.metrics_address {
        Some(addr) => Some(http::bind(addr).await?),
        None => None,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let nri_link = nri::NriLink::new();
    let probes = Arc::new(health::Probes::new(match &config.nri {
        NriMode::Plugin(settings) => Some((nri_link.clone(), settings.disconnected_grace)),
        NriMode::Off => None,
    }));
    let metrics_server = metrics_listener
        .map(|listener| tokio::spawn(http::serve(listener, Arc::clone(&probes), stopped())));
    let topology = corral_topology::sysfs::discover(&config.host_root).with_context(|| {
        format!(
            "discovering the CPU topology under {}",
            config.host_root.display()
        )
    })?;
    // Only the static memory policy reads the NUMA nodes' memory.
    let memory = match config.memory_manager.policy {
        corral_memmgr::MemoryPolicy::Static => {
            corral_topology::sysfs::discover_memory(&config.host_root).with_context(|| {
                format!(
                    "discovering the NUMA nodes' memory under {}",
                    config.host_root.display()
                )
            })?
        }
        _ => std::collections::BTreeMap::new(),
    };
    let nri_slot = nri::RuntimeSlot::default();
    let node = {
        let config = config.clone();
        let nri_slot = nri_slot.clone();
        let runtime: Arc<dyn corral_cpumgr::ContainerRuntime> =
            match (&config.nri, &config.container_runtime_endpoint) {
                (NriMode::Plugin(_), _) => Arc::new(nri::NriRuntime::new(nri_slot.clone())),
                (NriMode::Off, Some(socket)) => Arc::new(cri::CriRuntime::new(socket.clone())),
                (NriMode::Off, None) => Arc::new(NoRuntime),
            };
        tokio::task::spawn_blocking(move || Node::open(&config, &topology, &memory, runtime))
            .await??
    };
    let node = Arc::new(node);
    node.start_devices().await?;
    let flusher = node.spawn_journal_flusher();
    let capacity = node.spawn_device_capacity_refresher(crate::node::CAPACITY_PERIOD);
    let demo = match demo_devices {
        0 => None,
        n => Some(demo::start(&node, &config, n).await?),
    };
    tracing::info!(
        root = %config.layout.root().display(),
        pods = node.pods().len(),
        cpu_policy = node.cpu().policy_name(),
        "managers restored"
    );
    let watcher = node.registry().watch();
    let pushes_cpusets = config.container_runtime_endpoint.is_some() || config.nri != NriMode::Off;
    let reconcile =
        pushes_cpusets.then(|| tokio::spawn(reconcile_loop(Arc::clone(&node), stopped())));
    let nrt_publisher = match &config.nrt {
        Some(settings) => {
            Some(crate::nrt::spawn(Arc::clone(&node), settings, &config, stopped()).await?)
        }
        None => None,
    };
    let extra: metrics::ExtraFamilies = match &nrt_publisher {
        Some((_, stats)) => {
            let stats = Arc::clone(stats);
            Arc::new(move || stats.families())
        }
        None => Arc::new(Vec::new),
    };
    probes.restored(Arc::clone(&node), extra);
    let nri_plugin = match &config.nri {
        NriMode::Plugin(settings) => Some(tokio::spawn(nri::serve(
            Arc::clone(&node),
            settings.clone(),
            nri_slot.clone(),
            nri_link.clone(),
            stopped(),
        ))),
        NriMode::Off => None,
    };
    let agent_socket = config.layout.agent_socket();
    let agent_listener = UdsListener::bind(&agent_socket, &SocketOptions::default())
        .with_context(|| format!("binding {}", agent_socket.display()))?;
    let pr_socket = config.layout.pod_resources_socket();
    let pr_listener = UdsListener::bind(
        &pr_socket,
        &SocketOptions {
            dir_mode: 0o755,
            socket_mode: 0o600,
        },
    )
    .with_context(|| format!("binding {}", pr_socket.display()))?;

    // A request larger than maxManifestBytes (plus the message's framing) is refused by
    // the decoder with RESOURCE_EXHAUSTED before anything is parsed.
    let agent = tonic::transport::Server::builder().add_service(
        AgentServer::new(agent_api::AgentService::new(Arc::clone(&node)))
            .max_decoding_message_size(config.pod_limits.max_request_bytes()),
    );
    let pod_resources = tonic::transport::Server::builder().add_service(
        PodResourcesListerServer::new(podresources::PodResourcesService::new(Arc::clone(&node))),
    );
    let options = ServeOptions {
        grace: SHUTDOWN_GRACE,
        max_connections: config.max_connections_per_socket,
        ..ServeOptions::default()
    };
    let agent = tokio::spawn(serve_with(agent, agent_listener, stopped(), options));
    let pod_resources = tokio::spawn(serve_with(pod_resources, pr_listener, stopped(), options));
    tracing::info!(agent = %agent_socket.display(), podresources = %pr_socket.display(), "serving");
    let mut nri_plugin = nri_plugin;
    match &mut nri_plugin {
        Some(task) => tokio::select! {
            signal = wait_for_signal() => signal?,
            ended = task => {
                if ended? == nri::NriEnd::RuntimeLeft {
                    tracing::info!("the runtime that launched corral is gone");
                }
                nri_plugin = None;
            }
        },
        None => wait_for_signal().await?,
    }
    tracing::info!("shutting down: no new calls, finishing in-flight ones");
    let _ = stop_tx.send(true);
    agent.await?.context("serving the admission API")?;
    pod_resources
        .await?
        .context("serving the podresources API")?;
    if let Some(server) = metrics_server {
        server.await?;
    }
    drop(watcher);
    if let Some(task) = reconcile {
        task.await?;
    }
    if let Some(task) = nri_plugin {
        task.await?;
    }
    if let Some((task, stats)) = nrt_publisher {
        task.await?;
        tracing::info!(
            writes = stats.writes(),
            failed = stats.failures(),
            "stopped publishing the NodeResourceTopology"
        );
    }
    if let Some(plugin) = demo {
        plugin.stop().await;
    }
    node.stop_devices().await;
    flusher.abort();
    capacity.abort();
    // A journal that cannot be retired (a full disk) is kept for the next start to replay:
    // nothing is lost, but the stop was not clean, and the exit status says so.
    node.retire_journal()
        .context("stopping: the state journal is kept and replayed at the next start")?;
    tracing::info!(pods = node.pods().len(), "stopped");
    Ok(())
}

/// Push cpusets to the runtime every reconcile period (upstream `reconcileState`).
async fn reconcile_loop(node: Arc<Node>, stop: impl std::future::Future<Output = ()>) {
    let mut tick = tokio::time::interval(node.cpu().reconcile_period());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {}
        }
        let cpu = Arc::clone(node.cpu());
        // A task of its own: a panic ends the pass, not the loop.
        match tokio::spawn(async move { cpu.reconcile_once().await }).await {
            Ok(report) => tracing::debug!(
                success = report.success.len(),
                failure = report.failure.len(),
                "CPU reconcile pass"
            ),
            Err(err) => tracing::error!(%err, "CPU reconcile pass panicked"),
        }
    }
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
    Ok(())
}

//! Prometheus metrics in text format on `--metrics-addr` (loopback only, off by default),
//! with upstream's names: `topology_manager_admission_requests_total`,
//! `topology_manager_admission_errors_total`, `topology_manager_admission_duration_ms`,
//! `cpu_manager_pinning_requests_total`, `cpu_manager_pinning_errors_total`,
//! `device_plugin_registration_total`, `device_plugin_alloc_duration_seconds`,
//! `dra_operations_duration_seconds`; plus corral's
//! `corral_admitted_pods`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::node::Node;

/// What the agent measures itself (the managers count the rest).
#[derive(Debug, Clone)]
pub(crate) struct AgentMetrics {
    /// Admission latency in milliseconds (upstream buckets: 0.125 ms × 2^n, 20 buckets).
    pub(crate) admission_duration_ms: Histogram,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        Self {
            admission_duration_ms: Histogram::new(exponential_buckets(0.125, 2.0, 20)),
        }
    }
}

fn counter(value: u64) -> Counter {
    let counter = Counter::default();
    counter.inc_by(value);
    counter
}

/// The metrics as Prometheus text.
pub(crate) fn render(node: &Node, agent: &AgentMetrics) -> String {
    let mut registry = Registry::default();
    let topology = node.topology().metrics();
    registry.register(
        "topology_manager_admission_requests",
        "Number of admission requests where resources have to be aligned",
        counter(topology.admission_requests_total.load(Ordering::Relaxed)),
    );
    registry.register(
        "topology_manager_admission_errors",
        "Number of admission request failures where resources could not be aligned",
        counter(topology.admission_errors_total.load(Ordering::Relaxed)),
    );
    registry.register(
        "topology_manager_admission_duration_ms",
        "Duration in milliseconds to serve a pod admission request",
        agent.admission_duration_ms.clone(),
    );
    let cpu = node.cpu().metrics();
    registry.register(
        "cpu_manager_pinning_requests",
        "The number of cpu core allocations which required pinning",
        counter(cpu.pinning_requests_total.load(Ordering::Relaxed)),
    );
    registry.register(
        "cpu_manager_pinning_errors",
        "The number of cpu core allocations which required pinning failed",
        counter(cpu.pinning_errors_total.load(Ordering::Relaxed)),
    );
    let devices = node.device_metrics();
    registry.register(
        "device_plugin_registration",
        "Cumulative number of device plugin registrations",
        devices.registrations.clone(),
    );
    registry.register(
        "device_plugin_alloc_duration_seconds",
        "Duration in seconds to serve a device plugin Allocation request",
        devices.alloc_duration.clone(),
    );
    registry.register(
        "dra_operations_duration_seconds",
        "Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops",
        node.dra_durations().clone(),
    );
    let pods = Gauge::<i64>::default();
    pods.set(node.pods().len() as i64);
    registry.register(
        "corral_admitted_pods",
        "Pods admitted and not released",
        pods,
    );
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

/// Serve `GET /metrics` on `addr` until `shutdown` completes.
pub(crate) async fn serve(
    addr: SocketAddr,
    node: Arc<Node>,
    agent: AgentMetrics,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    tracing::info!(%addr, "serving metrics");
    tokio::pin!(shutdown);
    loop {
        let (mut stream, _) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(%err, "metrics accept failed");
                    continue;
                }
            },
        };
        let node = Arc::clone(&node);
        let agent = agent.clone();
        tokio::spawn(async move {
            let mut request = Vec::with_capacity(1024);
            let mut buf = [0u8; 1024];
            // Read the request head (bounded in size and time).
            let read = tokio::time::timeout(Duration::from_secs(5), async {
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 * 1024 {
                    let n = stream.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    request.extend_from_slice(&buf[..n]);
                }
                Ok::<_, std::io::Error>(())
            })
            .await;
            if !matches!(read, Ok(Ok(()))) {
                return;
            }
            let (status, body) = if request.starts_with(b"GET /metrics ") {
                ("200 OK", render(&node, &agent))
            } else {
                ("404 Not Found", "only GET /metrics is served\n".to_owned())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::node::tests::{config, fixture, open, pod};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_carry_upstream_names_and_counts() {
        let dir = tempfile::tempdir().unwrap();
        let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
        let node = open(&config(dir.path(), "single-numa-node", &[]), &topology).await;
        node.admit(pod("ok", &[2]), Vec::new()).await.unwrap();
        node.admit(pod("too-big", &[20]), Vec::new()).await.unwrap();
        let agent = super::AgentMetrics::default();
        agent.admission_duration_ms.observe(1.5);
        {
            use corral_devicemgr::DeviceManagerObserver as _;
            let devices = node.device_metrics();
            devices.plugin_registered("example.com/gpu");
            devices.allocate_rpc_finished("example.com/gpu", std::time::Duration::from_millis(3));
        }
        let text = super::render(&node, &agent);
        for line in [
            "topology_manager_admission_requests_total 2",
            "topology_manager_admission_errors_total 1",
            "topology_manager_admission_duration_ms_count 1",
            "cpu_manager_pinning_requests_total 1",
            "cpu_manager_pinning_errors_total 0",
            "corral_admitted_pods 1",
            "device_plugin_registration_total{resource_name=\"example.com/gpu\"} 1",
            "device_plugin_alloc_duration_seconds_count{resource_name=\"example.com/gpu\"} 1",
            "device_plugin_alloc_duration_seconds_bucket{le=\"0.005\",resource_name=\"example.com/gpu\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing in:\n{text}"
            );
        }
    }
}

//! Readers that answer the outside world (ListNumaNodes and ListPods for `corral status`,
//! podresources, the NodeResourceTopology's accounting, `/metrics`) racing a decision that
//! does not stand — an `admit --dry-run` trial, a refused admission — before it gives its
//! changes back: each either waits for it or answers the settled state, never the CPUs the
//! trial took. The decision is held open by a test-only pause, not by timing.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_server::Agent;
use tonic::Request;

use corral_proto::podresources::v1 as pr;
use corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesLister;

use super::agent_api::AgentService;
use super::metrics::{ExtraFamilies, render_settled};
use super::podresources::PodResourcesService;
use crate::config::AgentConfig;
use crate::node::tests::{admitted, pod, started};
use crate::node::{Admission, Node, pause};
use crate::nrt::Accounting;

/// One poll of `read` now, while the decision is paused; then, once `release` ran, its
/// answer (a reader that waited answers after the decision gave its changes back).
async fn raced<T>(read: impl Future<Output = T>, release: impl FnOnce()) -> (bool, T) {
    let mut read = pin!(read);
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    release();
    match first {
        Poll::Ready(answer) => (true, answer),
        Poll::Pending => (false, read.await),
    }
}

/// What `corral status` reads: every NUMA node's resources.
async fn numa_nodes(agent: &AgentService) -> Vec<api::NumaNode> {
    agent
        .list_numa_nodes(Request::new(api::ListNumaNodesRequest {}))
        .await
        .unwrap()
        .into_inner()
        .numa_nodes
}

/// Everything those readers answer, as one comparable text.
async fn read_all(node: &Arc<Node>, config: &AgentConfig, with_metrics: bool) -> String {
    let agent = AgentService::new(Arc::clone(node));
    let pods = agent
        .list_pods(Request::new(api::ListPodsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .pods;
    let lister = PodResourcesService::new(Arc::clone(node));
    let listed = lister
        .list(Request::new(pr::ListPodResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    let got = lister
        .get(Request::new(pr::GetPodResourcesRequest {
            pod_name: "first".to_owned(),
            pod_namespace: "default".to_owned(),
        }))
        .await
        .map(tonic::Response::into_inner);
    let nrt = Accounting::new("n", &config.cpu_manager)
        .take_settled(node)
        .await
        .unwrap();
    let metrics = if with_metrics {
        let extra: ExtraFamilies = Arc::new(Vec::new);
        render_settled(node, &extra).await.unwrap()
    } else {
        String::new()
    };
    format!(
        "numa {:?}\npods {pods:?}\npodresources {listed:?}\nget {got:?}\nnrt {:?}\nmetrics {metrics}",
        numa_nodes(&agent).await,
        serde_json::to_string(&nrt).unwrap(),
    )
}

async fn started_with_a_pod() -> (tempfile::TempDir, AgentConfig, Arc<Node>) {
    let (dir, config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    admitted(&node, pod("first", &[1])).await;
    (dir, config, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_numa_nodes_racing_a_dry_run_never_sees_its_cpus() {
    let (_dir, _config, node) = started_with_a_pod().await;
    let agent = AgentService::new(Arc::clone(&node));
    let settled = numa_nodes(&agent).await;

    let mut paused = pause::arm("trial");
    let dry = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit_dry_run(pod("trial", &[7]), Vec::new(), Vec::new())
                .await
        }
    });
    paused.reached().await;
    let (answered_at_once, seen) = raced(numa_nodes(&agent), || paused.go()).await;
    let answer = dry.await.unwrap().unwrap();
    assert!(matches!(answer, Admission::Admitted(_)), "{answer:?}");
    assert_eq!(
        seen, settled,
        "ListNumaNodes saw the dry run's CPUs (answered while it was held: {answered_at_once})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outside_reader_racing_a_dry_run_answers_settled_state() {
    let (_dir, config, node) = started_with_a_pod().await;
    let settled = read_all(&node, &config, true).await;

    let mut paused = pause::arm("trial");
    let dry = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit_dry_run(pod("trial", &[7]), Vec::new(), Vec::new())
                .await
        }
    });
    paused.reached().await;
    let (answered_at_once, seen) = raced(read_all(&node, &config, true), || paused.go()).await;
    let answer = dry.await.unwrap().unwrap();
    assert!(matches!(answer, Admission::Admitted(_)), "{answer:?}");
    assert!(
        !answered_at_once,
        "a reader answered while the trial held the lock"
    );
    assert_eq!(seen, settled);
    assert_eq!(read_all(&node, &config, true).await, settled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outside_reader_racing_a_refused_admission_answers_settled_state() {
    let (_dir, config, node) = started_with_a_pod().await;
    // Metrics left out: a refusal is counted (as the kubelet counts it).
    let settled = read_all(&node, &config, false).await;

    let mut paused = pause::arm("unalignable");
    let refused = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(pod("unalignable", &[3, 9]), Vec::new()).await }
    });
    paused.reached().await;
    let (answered_at_once, seen) = raced(read_all(&node, &config, false), || paused.go()).await;
    let answer = refused.await.unwrap().unwrap();
    assert!(matches!(answer, Admission::Rejected { .. }), "{answer:?}");
    assert!(
        !answered_at_once,
        "a reader answered while the refusal held the lock"
    );
    assert_eq!(seen, settled);
}

//! Events around an admission waiting for its device plugin: a container event of the same
//! pod (NRI admits containers one at a time), the CPU manager's reconcile loop, a refused
//! pod waiting for the allocation under way, and a caller that stops waiting.

use std::sync::Arc;
use std::time::Duration;

use super::Node;
use super::tests::WAIT;
use super::tests_concurrent::{config, guaranteed, machine, open, outcome};
use super::tests_gated_plugin::{GPU, GatedPlugin, Held};
use k8s_openapi::api::core::v1::Pod as K8sPod;

fn one(uid: &str, name: &str, limits: serde_json::Value) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": name, "resources": {"limits": limits}}]},
    }))
    .unwrap()
}

/// Pod p: container a admitted and started (id "id-a"); container b (2 CPUs, 1 GPU) is
/// admitted while its plugin's `Allocate` is held; meanwhile container a is removed (the
/// runtime's container GC, an NRI RemoveContainer) and the CPU manager's reconcile loop
/// ticks. Container b, once admitted, must still hold its exclusive CPUs and memory.
async fn event_during_allocate(removed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "none", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, &[0, 1], Held::Allocate, false).await;
    let a = tokio::time::timeout(
        WAIT,
        node.admit_container(one(
            "p",
            "a",
            serde_json::json!({"cpu": "1", "memory": "100Mi"}),
        )),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(outcome(&a), "admitted");
    node.container_started("p", "a", "id-a").await.unwrap();
    let b = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit_container(one(
                "p",
                "b",
                serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "1"}),
            ))
            .await
        }
    });
    plugin.until_held().await;
    assert!(
        !node.cpu().exclusive_cpus("p", "b").is_empty(),
        "b's CPUs taken in its decision"
    );
    // The event waits for b's admission (it takes the pod's lock), so it cannot strip the
    // container being admitted of its in-flight mark.
    let event = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            if removed {
                node.container_removed("id-a").await
            } else {
                node.container_started("p", "a", "id-a2").await
            }
        }
    });
    let deadline = std::time::Instant::now() + WAIT;
    while super::locks::tests::holders_and_waiters(&node.pod_locks, "p") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the event never queued"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The reconcile loop's tick (outside the decision lock, as `server::reconcile_loop`).
    let cpu = Arc::clone(node.cpu());
    tokio::spawn(async move { cpu.reconcile_once().await })
        .await
        .unwrap();
    plugin.open();
    let b = tokio::time::timeout(WAIT, b)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome(&b), "admitted");
    tokio::time::timeout(WAIT, event)
        .await
        .expect("the event ends")
        .unwrap()
        .unwrap();
    let cpus = node.cpu().exclusive_cpus("p", "b");
    let mem = node.memory().memory_numa_nodes("p", "b");
    // Another pod now: it must not be given b's CPUs.
    let q = tokio::time::timeout(
        WAIT,
        node.admit(
            guaranteed("q", serde_json::json!({"cpu": "5", "memory": "100Mi"})),
            Vec::new(),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let q_cpus = node.cpu().exclusive_cpus("q", "c0");
    plugin.stop().await;
    node.stop_devices().await;
    assert_eq!(
        cpus.len(),
        2,
        "container b admitted without its exclusive CPUs (memory {mem:?})"
    );
    assert!(!mem.is_empty(), "container b admitted without its memory");
    assert!(
        !q_cpus.intersects(&cpus),
        "q ({}) got b's CPUs {cpus}: {}",
        q_cpus,
        outcome(&q)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_removed_while_its_sibling_waits_for_allocate_leaves_the_sibling_its_cpus() {
    event_during_allocate(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_started_while_its_sibling_waits_for_allocate_leaves_the_sibling_its_cpus() {
    event_during_allocate(false).await;
}

fn in_flight(node: &Arc<Node>) -> (usize, usize) {
    node.devices()
        .with_state(|s| (s.reservations_in_flight(), s.admissions_in_flight()))
}

/// A pod refused while another pod's `Allocate` is under way (here one that could never
/// fit: 64 CPUs of 8) waits for that allocation, whose failure would free what it holds,
/// and is answered once it ends; the wait is bounded (`REALIZE_WAIT`) whatever the plugin
/// does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_refused_while_an_allocate_is_under_way_is_answered_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "restricted", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, &[0, 1], Held::Allocate, false).await;
    let gpu = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            let pod = guaranteed(
                "gpu",
                serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "1"}),
            );
            node.admit(pod, Vec::new()).await
        }
    });
    plugin.until_held().await;
    let never = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            let pod = guaranteed("never", serde_json::json!({"cpu": "64", "memory": "100Mi"}));
            node.admit(pod, Vec::new()).await
        }
    });
    let deadline = std::time::Instant::now() + WAIT;
    while node.realizing.waiting() == 0 {
        assert!(
            !never.is_finished(),
            "the refusal did not wait for the Allocate under way"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the refusal never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    plugin.open();
    let gpu = tokio::time::timeout(WAIT, gpu)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let never = tokio::time::timeout(WAIT, never)
        .await
        .expect("the refused pod is answered once the Allocate ended")
        .unwrap()
        .unwrap();
    plugin.stop().await;
    node.stop_devices().await;
    assert_eq!(outcome(&gpu), "admitted");
    assert!(
        outcome(&never).starts_with("TopologyAffinityError"),
        "{}",
        outcome(&never)
    );
}

/// The caller of an admission stops waiting while its plugin's `Allocate` is held, and
/// the plugin then fails it: once idle nothing stays (no reservation, no admission in
/// flight, no admitting marker, no CPUs, no memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_admission_whose_allocate_fails_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "none", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, &[0, 1], Held::Allocate, true).await;
    let pod = guaranteed(
        "gpu",
        serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "1"}),
    );
    let admission = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(pod, Vec::new()).await }
    });
    plugin.until_held().await;
    admission.abort();
    let _ = admission.await;
    // Meanwhile a pod refused (more CPUs than what is left), then decided again.
    let other = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit(
                guaranteed("other", serde_json::json!({"cpu": "6", "memory": "100Mi"})),
                Vec::new(),
            )
            .await
        }
    });
    let deadline = std::time::Instant::now() + WAIT;
    while node.realizing.waiting() == 0 && !other.is_finished() {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    plugin.open();
    let other = tokio::time::timeout(WAIT, other)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while (in_flight(&node) != (0, 0) || node.pods.active_uids().len() != 1)
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (flight, active) = (in_flight(&node), node.pods.active_uids());
    let gpu_cpus = node.cpu().exclusive_cpus("gpu", "c0");
    let gpu_mem = node.memory().memory_numa_nodes("gpu", "c0");
    plugin.stop().await;
    node.stop_devices().await;
    assert_eq!(
        outcome(&other),
        "admitted",
        "the refused pod was not decided again"
    );
    assert_eq!(flight, (0, 0));
    assert_eq!(active.into_iter().collect::<Vec<_>>(), ["other"]);
    assert!(
        gpu_cpus.is_empty() && gpu_mem.is_empty(),
        "{gpu_cpus} {gpu_mem:?}"
    );
}

//! Pods that wait for their device plugins still get the decisions of a serial order
//! (issue 29): the device manager reserves devices inside the decision, and the plugins
//! answer after it (`GetPreferredAllocation` between two decisions of the pod,
//! `Allocate` after its last), outside the decision lock.
//!
//! The plugin here is held by the test at either call, so the tests can admit another pod
//! while it waits: that pod is decided on the state the waiting pod's decision left, and
//! the waiting pod's memory is allocated with the hint it was decided with.

use std::sync::Arc;

use super::tests::WAIT;
use super::tests_concurrent::{big_pod, config, guaranteed, machine, open, outcome, small_pod};
use super::tests_gated_plugin::{GPU, GatedPlugin, Held};
use super::{Admission, Node};

/// The big pod (5 CPUs, 1200Mi and `wanted` of the `gpus` (their NUMA nodes), so that its
/// only hint is {0,1}) on a 2-node machine, and the small pod (1 CPU, 100Mi) admitted while the big pod's plugin
/// is held at `held`; then the plugin answers. Returns both outcomes and the plugin.
async fn big_waits_small_passes(gpus: &[i64], wanted: usize, held: Held) -> Outcomes {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "restricted", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, gpus, held, false).await;
    let big = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit(
                big_pod(serde_json::json!({GPU: wanted.to_string()})),
                Vec::new(),
            )
            .await
        }
    });
    plugin.until_held().await;
    let small = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(small_pod(), Vec::new()).await }
    });
    // The small pod is decided now: admitted, or refused and then waiting for the big
    // pod's allocation under way (a failure would free what the big pod holds).
    let deadline = std::time::Instant::now() + WAIT;
    while !small.is_finished() && node.realizing.waiting() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the small pod was never decided"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        !big.is_finished(),
        "the big pod did not wait for its plugin"
    );
    plugin.open();
    let big = tokio::time::timeout(WAIT, big)
        .await
        .expect("the big pod's admission ends")
        .unwrap()
        .unwrap();
    let small = tokio::time::timeout(WAIT, small)
        .await
        .expect("the small pod's admission ends")
        .unwrap()
        .unwrap();
    Outcomes {
        big: outcome(&big),
        small: outcome(&small),
        node,
        plugin,
        _dir: dir,
    }
}

/// What [`big_waits_small_passes`] leaves.
struct Outcomes {
    big: String,
    small: String,
    node: Arc<Node>,
    plugin: GatedPlugin,
    _dir: tempfile::TempDir,
}

/// Issue 29 (the memory manager once allocated the big pod with the hint taken before the
/// small pod's decision, which ran while the plugin answered `Allocate`, and the big pod
/// failed with `UnexpectedAdmissionError: … preferred hint violates NUMA node
/// allocation`): the big pod's whole decision comes first, then the small pod's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_decided_while_another_waits_for_its_plugins_allocate_comes_after_it() {
    let Outcomes {
        big,
        small,
        node,
        plugin,
        _dir,
    } = big_waits_small_passes(&[0, 1], 2, Held::Allocate).await;
    assert_eq!(big, "admitted", "small = {small}");
    assert_eq!(node.memory().memory_numa_nodes("big", "c0"), [0, 1].into());
    assert_eq!(plugin.allocations(), [vec!["gpu-0", "gpu-1"]]);
    plugin.stop().await;
    node.stop_devices().await;
    // Big first: its memory spans both nodes, so the small pod has no single-node hint.
    assert_serial_with_gpus(&[0, 1], 2, (big, small)).await;
}

/// `got` (the big and the small pod's outcomes) is what one of the two serial orders
/// gives, on a node whose GPUs need no plugin call to be decided.
async fn assert_serial_with_gpus(gpus: &[i64], wanted: usize, got: (String, String)) {
    let machine = machine(2, 4, 1024, 0);
    let mut serial = Vec::new();
    for big_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let node = open(&config(dir.path(), "restricted", "container"), &machine).await;
        let plugin = GatedPlugin::start(&node, gpus, Held::Allocate, false).await;
        plugin.open();
        let big = || big_pod(serde_json::json!({GPU: wanted.to_string()}));
        let (first, second) = if big_first {
            (big(), small_pod())
        } else {
            (small_pod(), big())
        };
        let first = outcome(&node.admit(first, Vec::new()).await.unwrap());
        let second = outcome(&node.admit(second, Vec::new()).await.unwrap());
        plugin.stop().await;
        node.stop_devices().await;
        serial.push(if big_first {
            (first, second)
        } else {
            (second, first)
        });
    }
    assert!(
        serial.contains(&got),
        "no serial order gives {got:?}; serial orders give {serial:?}"
    );
}

/// The same with the plugin held in `GetPreferredAllocation` (two GPUs per node, so the
/// big pod's three are a choice the plugin is asked about): the big pod's first decision is given back
/// whole before the plugin is asked, so the small pod is decided on a node without it,
/// and the big pod's second decision comes after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_decided_while_another_waits_for_its_plugins_preference_comes_before_it() {
    let Outcomes {
        big,
        small,
        node,
        plugin,
        _dir,
    } = big_waits_small_passes(&[0, 0, 1, 1], 3, Held::Preferred).await;
    assert_eq!(small, "admitted");
    if big == "admitted" {
        assert_eq!(node.memory().memory_numa_nodes("big", "c0"), [0, 1].into());
        let big_cpus = node.cpu().exclusive_cpus("big", "c0");
        let small_cpus = node.cpu().exclusive_cpus("small", "c0");
        assert!(big_cpus.intersection(&small_cpus).is_empty());
    }
    plugin.stop().await;
    node.stop_devices().await;
    assert_serial_with_gpus(&[0, 0, 1, 1], 3, (big, small)).await;
}

/// The plugin's preference is what the pod gets: asked once on the exact question (all
/// aligned devices, none required), its answer (the last ids) is allocated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugins_preferred_allocation_is_asked_outside_the_decision_and_followed() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "best-effort", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, &[0, 0, 0, 1], Held::Allocate, false).await;
    plugin.open();
    let pod = guaranteed(
        "p",
        serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "2"}),
    );
    let answer = tokio::time::timeout(WAIT, node.admit(pod, Vec::new()))
        .await
        .expect("the admission ends")
        .unwrap();
    assert_eq!(outcome(&answer), "admitted");
    // The pod's hint is node 0 (three GPUs there): the question is about those three.
    let ids = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        plugin.questions(),
        [(ids(&["gpu-0", "gpu-1", "gpu-2"]), Vec::new())]
    );
    // Taken in id order (upstream ranges over a Go set).
    assert_eq!(plugin.allocations(), [ids(&["gpu-1", "gpu-2"])]);
    let held = node.devices().container_devices("p", "c0");
    let got: Vec<String> = held[GPU].device_ids().into_iter().collect();
    assert_eq!(got, ids(&["gpu-1", "gpu-2"]));
    plugin.stop().await;
    node.stop_devices().await;
}

/// A plugin whose `Allocate` fails: the pod is refused as upstream refuses it, and
/// everything its decision took (CPUs, memory, devices) is free again for the next pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_allocate_gives_back_the_whole_decision() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "restricted", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, &[0, 1], Held::Allocate, true).await;
    plugin.open();
    let answer = tokio::time::timeout(
        WAIT,
        node.admit(big_pod(serde_json::json!({GPU: "2"})), Vec::new()),
    )
    .await
    .expect("the admission ends")
    .unwrap();
    let refused = outcome(&answer);
    assert!(
        refused.starts_with("UnexpectedAdmissionError: Allocate failed due to "),
        "{refused}"
    );
    assert!(refused.contains("the test says no"), "{refused}");
    assert!(node.cpu().exclusive_cpus("big", "c0").is_empty());
    assert!(node.memory().memory_numa_nodes("big", "c0").is_empty());
    assert!(node.devices().container_devices("big", "c0").is_empty());
    assert_eq!(
        node.topology()
            .metrics()
            .admission_errors_total
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // Everything is free: a pod as big without devices is admitted.
    let again = node
        .admit(
            guaranteed("again", serde_json::json!({"cpu": "7", "memory": "1800Mi"})),
            Vec::new(),
        )
        .await
        .unwrap();
    assert!(matches!(again, Admission::Admitted(_)), "{again:?}");
    plugin.stop().await;
    node.stop_devices().await;
}

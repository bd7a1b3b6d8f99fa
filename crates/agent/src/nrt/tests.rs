//! The publisher against scripted API servers: what it writes, when, and how it rides out
//! conflicts, 429s, error storms and a server that never answers — the node's admissions
//! never waiting for any of it.

use std::sync::Arc;
use std::time::Duration;

use corral_nrt::{ATTRIBUTE_POLICY, ATTRIBUTE_SCOPE, NodeResourceTopology};

use super::api::ApiError;
use super::tests_fake_server::{FakeServer, Harness, Scripted};
use crate::node::tests::WAIT;

fn available_cpus(nrt: &NodeResourceTopology) -> Vec<(String, String)> {
    nrt.zones
        .iter()
        .map(|z| {
            (
                z.name.clone(),
                z.resource("cpu").unwrap().available.0.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_object_has_a_node_zone_per_numa_node_and_the_policy() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    let nrt = harness.converged().await;
    assert_eq!(nrt.metadata.name, "worker-1");
    let names: Vec<_> = nrt
        .zones
        .iter()
        .map(|z| (z.name.as_str(), z.zone_type.as_str()))
        .collect();
    assert_eq!(names, [("node-0", "Node"), ("node-1", "Node")]);
    assert_eq!(nrt.attribute(ATTRIBUTE_POLICY), Some("single-numa-node"));
    assert_eq!(nrt.attribute(ATTRIBUTE_SCOPE), Some("container"));
    assert_eq!(nrt.topology_policies, ["SingleNUMANodeContainerLevel"]);
    // No pod yet: the fingerprint of the empty set.
    assert_eq!(
        nrt.attribute(corral_nrt::ATTRIBUTE_FINGERPRINT),
        Some(corral_nrt::PodFingerprint::new().sign().as_str())
    );
    assert_eq!(
        nrt.attribute(corral_nrt::ATTRIBUTE_FINGERPRINT_METHOD),
        Some("with-exclusive-resources")
    );
    // 8 CPUs a node; CPU 0 (node 0) reserved.
    let cpu = |zone: usize| nrt.zones[zone].resource("cpu").unwrap().clone();
    assert_eq!(
        (cpu(0).capacity.0.as_str(), cpu(0).allocatable.0.as_str()),
        ("8", "7")
    );
    assert_eq!(
        (cpu(1).capacity.0.as_str(), cpu(1).allocatable.0.as_str()),
        ("8", "8")
    );
    // Distances from the fixture's SLIT.
    let costs: Vec<_> = nrt.zones[0]
        .costs
        .iter()
        .map(|c| (c.name.as_str(), c.value))
        .collect();
    assert_eq!(costs, [("node-0", 10), ("node-1", 21)]);
    assert_eq!(harness.stats.writes(), 1);
    harness.stop().await;
}

#[tokio::test]
async fn an_exclusive_admission_lowers_its_zone_and_costs_one_write() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    let before = harness.converged().await;
    let writes = harness.stats.writes();
    harness.admit("p1", &[4]).await;
    let after = harness.converged().await;
    let mut with_p1 = corral_nrt::PodFingerprint::new();
    with_p1.add("default", "p1");
    assert_eq!(
        after.attribute(corral_nrt::ATTRIBUTE_FINGERPRINT),
        Some(with_p1.sign().as_str())
    );
    let total = |nrt: &NodeResourceTopology| -> u64 {
        available_cpus(nrt)
            .iter()
            .map(|(_, n)| n.parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(total(&before) - total(&after), 4);
    // The admission's commit and nothing else: one write (nothing else changes the object).
    tokio::time::sleep(super::publisher::COALESCE * 3).await;
    assert_eq!(harness.stats.writes(), writes + 1);
    // The release gives them back.
    assert!(harness.node.release("p1").await.unwrap());
    let released = harness.converged().await;
    assert_eq!(total(&released), total(&before));
    harness.stop().await;
}

#[tokio::test]
async fn a_burst_of_admissions_during_a_write_is_one_more_write() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    let writes = harness.stats.writes();
    // The next call waits until released: the first admission's write is in flight while
    // the others are decided.
    harness.server.script([Scripted::Hold]);
    harness.admit("p0", &[1]).await;
    for i in 1..6 {
        harness.admit(&format!("p{i}"), &[1]).await;
    }
    harness.server.release.notify_one();
    harness.converged().await;
    let written = harness.stats.writes() - writes;
    assert!(written <= 2, "{written} writes for a burst of 6 admissions");
    harness.stop().await;
}

#[tokio::test]
async fn a_state_that_keeps_changing_costs_one_write_a_second() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    let writes = harness.stats.writes();
    let started = std::time::Instant::now();
    for i in 0..30 {
        let uid = format!("flap{i}");
        harness.admit(&uid, &[1]).await;
        assert!(harness.node.release(&uid).await.unwrap());
    }
    harness.admit("last", &[1]).await;
    harness.converged().await;
    let elapsed = started.elapsed();
    let written = harness.stats.writes() - writes;
    // However slow the machine: at most one write per started second of changes, plus the
    // last one.
    let bound = elapsed.as_secs() + 2;
    assert!(written <= bound, "{written} writes in {elapsed:?}");
    harness.stop().await;
}

#[tokio::test]
async fn someone_elses_change_is_overwritten_on_conflict_and_on_resync() {
    let harness = Harness::start(Duration::from_secs(1)).await;
    harness.converged().await;
    // Changed behind corral's back: the next write meets a conflict, reads, rewrites.
    harness.server.tamper(|nrt| nrt.zones[0].resources.clear());
    harness.admit("p1", &[2]).await;
    harness.converged().await;
    // Changed again with nothing to write: the resync (1 s) finds and repairs it.
    harness.server.tamper(|nrt| nrt.attributes.clear());
    harness.converged().await;
    // Deleted: recreated by the resync.
    *harness.server.object.lock().unwrap() = None;
    harness.converged().await;
    harness.stop().await;
}

#[tokio::test]
async fn a_refusal_that_will_not_change_is_retried_far_less_often() {
    // Eight 403s (RBAC missing): the harness' backoff (10 ms doubling, 200 ms cap) would
    // retry them all within 0.91 s; a 4xx backs off to 8 × the cap, 2.55 s in all.
    let server = Arc::new(FakeServer::default());
    server.script((0..8).map(|_| {
        Scripted::Fail(|| ApiError::Status {
            status: 403,
            message: "noderesourcetopologies is forbidden".into(),
        })
    }));
    let started = std::time::Instant::now();
    let harness = Harness::start_with(Duration::from_secs(3600), server).await;
    harness.converged().await;
    assert_eq!(harness.stats.failures(), 8);
    // A lower bound: waits only grow on a busy machine.
    assert!(
        started.elapsed() >= Duration::from_millis(2550),
        "{:?}",
        started.elapsed()
    );
    harness.stop().await;
}

#[tokio::test]
async fn error_storms_and_429s_are_retried_until_the_object_is_right() {
    let server = Arc::new(FakeServer::default());
    server.script((0..6).map(|i| {
        Scripted::Fail(if i % 2 == 0 {
            || ApiError::Status {
                status: 503,
                message: "etcd leader changed".into(),
            }
        } else {
            || ApiError::TooManyRequests {
                retry_after: Some(Duration::from_millis(1)),
            }
        })
    }));
    let harness = Harness::start_with(Duration::from_secs(3600), server).await;
    harness.converged().await;
    assert_eq!(harness.stats.failures(), 6);
    // One episode: logged when it started and when it ended, not per failure.
    assert_eq!(
        harness
            .stats
            .episodes
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    harness.stop().await;
}

#[tokio::test]
async fn a_server_that_never_answers_delays_no_admission_or_release() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    harness.server.hang.send_replace(true);
    for i in 0..4 {
        harness.admit(&format!("p{i}"), &[2]).await;
    }
    let released = tokio::time::timeout(WAIT, harness.node.release("p0"))
        .await
        .expect("the release waits for nothing the API server does");
    assert!(released.unwrap());
    // The server answers again: the object catches up.
    harness.server.hang.send_replace(false);
    harness.converged().await;
    harness.stop().await;
}

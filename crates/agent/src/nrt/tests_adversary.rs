//! The publisher's promises attacked with a lying server: answers that name another object,
//! carry a stale `resourceVersion` or report a write that was then lost; a 429 whose
//! `Retry-After` a resync falls inside; a server that conflicts forever; a restart that finds
//! its own object; a stop while a call hangs; changes spread over seconds (their writes a
//! second apart). Every test ends with the object equal to the node's state, or with a
//! bound on what the publisher asked of the server.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use corral_nrt::NodeResourceTopology;

use super::api::ApiError;
use super::publisher::MIN_WRITE_INTERVAL;
use super::tests_fake_server::{FakeServer, Harness, Scripted};
use crate::node::tests::WAIT;

/// Wait (bounded by `WAIT`) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn renamed(nrt: &mut NodeResourceTopology) {
    nrt.metadata.name = "worker-2".to_owned();
}

fn stale(nrt: &mut NodeResourceTopology) {
    nrt.metadata.resource_version = Some("1".to_owned());
}

/// The server answers a read with another node's object that says the same: the publisher
/// must not take it for its own (`same_content` ignores the name) and must write its own.
#[tokio::test]
async fn another_objects_answer_is_not_taken_for_ours() {
    let harness = Harness::start(Duration::from_millis(100)).await;
    harness.converged().await;
    // The server's only object now answers as `worker-2`, same content, same version.
    harness
        .server
        .object
        .lock()
        .unwrap()
        .as_mut()
        .unwrap()
        .metadata
        .name = "worker-2".to_owned();
    // The resync (every 100 ms) reads it; the publisher writes `worker-1` over it.
    let deadline = Instant::now() + WAIT;
    loop {
        let object = harness.server.object().unwrap();
        if object.metadata.name == "worker-1" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the publisher took worker-2's object for its own ({} reads)",
            harness.stats.reads.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    harness.converged().await;
    harness.stop().await;
}

/// A write answered with another object's name: the next resync reads and repairs.
#[tokio::test]
async fn a_write_answered_with_another_name_converges() {
    let harness = Harness::start(Duration::from_millis(200)).await;
    harness.converged().await;
    harness.server.script([Scripted::Twist(renamed)]);
    harness.admit("p1", &[2]).await;
    harness.converged().await;
    // Another change after it: written with the right name too.
    harness.admit("p2", &[2]).await;
    let nrt = harness.converged().await;
    assert_eq!(nrt.metadata.name, "worker-1");
    harness.stop().await;
}

/// A write answered with a stale `resourceVersion`: the next write meets a conflict, reads
/// the fresh object and succeeds.
#[tokio::test]
async fn a_stale_resource_version_in_an_answer_costs_one_conflict() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    harness.server.script([Scripted::Twist(stale)]);
    harness.admit("p1", &[2]).await;
    harness.converged().await;
    let reads = harness.stats.reads.load(Ordering::Relaxed);
    harness.admit("p2", &[2]).await;
    harness.converged().await;
    // One conflict, one read of the fresh object, no failure.
    assert_eq!(harness.stats.reads.load(Ordering::Relaxed), reads + 1);
    assert_eq!(harness.stats.failures(), 0);
    harness.stop().await;
}

/// The server answers 200 to a write and then has not got it: with nothing else changing,
/// the resync finds and rewrites it.
#[tokio::test]
async fn a_write_the_server_lost_is_rewritten_by_the_resync() {
    let harness = Harness::start(Duration::from_millis(300)).await;
    harness.converged().await;
    let writes = harness.stats.writes();
    harness.server.script([Scripted::Lose]);
    harness.admit("p1", &[2]).await;
    harness.converged().await;
    // The lost write and the resync's rewrite.
    assert!(harness.stats.writes() >= writes + 2);
    harness.stop().await;
}

/// A 429 with `Retry-After: 3` while the resync period is far shorter: no call reaches the
/// server before the 3 s are up (neither the retry nor a resync). Lower bounds on measured
/// gaps: a slow machine only makes them longer.
#[tokio::test]
async fn retry_after_holds_off_the_resync_too() {
    let harness = Harness::start(Duration::from_millis(100)).await;
    harness.converged().await;
    harness
        .server
        .script([Scripted::Fail(|| ApiError::TooManyRequests {
            retry_after: Some(Duration::from_secs(3)),
        })]);
    until("the 429 was answered", || harness.stats.failures() == 1).await;
    // The 429'd call is the last one so far (unless a call followed at once: then that one
    // is the one measured from, and the bound is as strict).
    let times = harness.server.call_times();
    let refused = *times.last().unwrap();
    until("a call after the 429", || {
        harness.server.call_times().len() > times.len()
    })
    .await;
    let next = harness.server.call_times()[times.len()];
    let gap = next - refused;
    assert!(
        gap >= Duration::from_secs(3),
        "the server was called again {gap:?} after its 429 asked for 3 s"
    );
    harness.converged().await;
    harness.stop().await;
}

/// A failing server with a resync period shorter than the backoff: calls keep to the
/// backoff, not to the resync period.
#[tokio::test]
async fn the_resync_does_not_shortcut_the_backoff() {
    let server = Arc::new(FakeServer::default());
    let harness = Harness::start_with(Duration::from_millis(20), Arc::clone(&server)).await;
    harness.converged().await;
    server.script((0..8).map(|_| {
        Scripted::Fail(|| ApiError::Status {
            status: 503,
            message: "etcd leader changed".into(),
        })
    }));
    until("eight failures", || harness.stats.failures() >= 8).await;
    // The harness' backoff: 10 ms doubling to 200 ms. The gaps between failed calls after
    // the first must each be at least the backoff then due.
    let times = server.call_times();
    let failed: Vec<Instant> = times[times.len() - 8..].to_vec();
    let mut backoff = Duration::from_millis(10);
    for pair in failed.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= backoff,
            "a call {gap:?} after a failure, backoff {backoff:?}"
        );
        backoff = (backoff * 2).min(Duration::from_millis(200));
    }
    harness.converged().await;
    harness.stop().await;
}

/// A server that conflicts on every call: each attempt is bounded (a replace and a read per
/// conflict retry at most), and attempts keep to the backoff.
#[tokio::test]
async fn a_server_that_always_conflicts_is_not_hammered() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    harness
        .server
        .script((0..40).map(|_| Scripted::Fail(|| ApiError::Conflict)));
    let calls = harness.server.calls();
    let started = Instant::now();
    harness.admit("p1", &[2]).await;
    harness.converged().await;
    let elapsed = started.elapsed();
    let failures = harness.stats.failures();
    let made = harness.server.calls() - calls;
    // A failed attempt is one or two calls (a replace and the read after its conflict;
    // after a failed read, the read alone); then a read and the replace that succeeds.
    assert!(made <= 42, "{made} calls for 40 conflicts");
    assert!(
        failures >= 20,
        "{failures} failed attempts for {made} calls"
    );
    // Every failed attempt waited its backoff: 10, 20, 40, … capped at 200 ms.
    let least: Duration = (0..failures)
        .map(|i| Duration::from_millis(10 << i.min(5)).min(Duration::from_millis(200)))
        .sum();
    assert!(elapsed >= least, "{failures} failures in {elapsed:?}");
    harness.stop().await;
}

/// A restart (a new publisher) that finds its own object already right writes nothing; its
/// first change is one write.
#[tokio::test]
async fn a_restart_that_finds_its_object_right_does_not_rewrite_it() {
    let first = Harness::start(Duration::from_secs(3600)).await;
    first.converged().await;
    let server = Arc::clone(&first.server);
    first.stop().await;
    let second = Harness::start_with(Duration::from_secs(3600), server).await;
    until("the restart read the object", || {
        second.stats.reads.load(Ordering::Relaxed) >= 1
    })
    .await;
    second.admit("p1", &[2]).await;
    second.converged().await;
    assert_eq!(second.stats.writes(), 1, "only the admission is written");
    second.stop().await;
}

/// Resyncs of an object nobody changed read it and write nothing.
#[tokio::test]
async fn a_resync_of_an_unchanged_object_writes_nothing() {
    let harness = Harness::start(Duration::from_millis(50)).await;
    harness.converged().await;
    let writes = harness.stats.writes();
    until("five resyncs", || {
        harness.stats.reads.load(Ordering::Relaxed) >= 6
    })
    .await;
    assert_eq!(harness.stats.writes(), writes);
    harness.stop().await;
}

/// The server never answers the call in flight when the agent stops: the stop does not
/// wait for it (the agent's shutdown awaits the publisher, then retires its journal; a
/// hostile server could hold it for a deadline per call, up to seven calls in one attempt).
#[tokio::test]
async fn a_stop_does_not_wait_for_a_call_in_flight() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    harness.server.hang.send_replace(true);
    let calls = harness.server.calls();
    harness.admit("p1", &[2]).await;
    until("a call in flight", || harness.server.calls() > calls).await;
    harness.stop_now().await;
}

/// Changes spread over seconds: the writes they cause are at least `MIN_WRITE_INTERVAL`
/// apart (lower bounds on the server's own timestamps: a slow machine only widens them).
#[tokio::test]
async fn writes_after_changes_are_a_second_apart() {
    let harness = Harness::start(Duration::from_secs(3600)).await;
    harness.converged().await;
    let before = harness.server.write_times().len();
    for i in 0..12 {
        harness.admit(&format!("p{i}"), &[1]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    harness.converged().await;
    let times = harness.server.write_times();
    // From the last write before the changes (the first one is held off by it too).
    let writes = &times[before - 1..];
    assert!(
        writes.len() >= 3,
        "{} writes over 3.6 s of changes",
        writes.len() - 1
    );
    for pair in writes.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= MIN_WRITE_INTERVAL, "two writes {gap:?} apart");
    }
    harness.stop().await;
}

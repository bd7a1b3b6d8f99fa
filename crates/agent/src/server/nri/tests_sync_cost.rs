//! What the NRI scenario costs in fsync/fdatasync calls: two pods of one container each,
//! after one Synchronize, through their whole lives (create, start, stop, remove, sandbox
//! stopped and removed). Each event's count is asserted.

use corral_proto::nri::api;
use corral_proto::nri::plugin::NriPlugin;

use super::plugin::NodePlugin;
use crate::config::PinnedCpusets;
use crate::node::tests::started;

/// Guaranteed pod `n`'s sandbox.
pub(super) fn sandbox(n: u8) -> api::PodSandbox {
    super::tests::pod(n, 0)
}

fn container(n: u8) -> api::Container {
    api::Container {
        id: format!("c-{n}"),
        pod_sandbox_id: format!("sb-{n}"),
        name: "c".into(),
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: Some(api::LinuxCpu {
                    shares: Some(api::OptionalUInt64 { value: 2048 }),
                    quota: Some(api::OptionalInt64 { value: 200_000 }),
                    period: Some(api::OptionalUInt64 { value: 100_000 }),
                    ..Default::default()
                }),
                memory: Some(api::LinuxMemory {
                    limit: Some(api::OptionalInt64 { value: 64 << 20 }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The runtime's events of the scenario, in order, with the fsync/fdatasync calls each
/// may cost: one per change of state, none for an event that changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nri_scenario_costs_one_sync_per_change_of_state() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    // Start-up: the journal's first snapshot and its directory (the mark needs none).
    let mut costs = vec![("start-up".to_owned(), node.state_syncs())];
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    let mut seen = node.state_syncs();
    // What the event cost, once all it wrote is durable.
    let mut cost = async |what: String| {
        node.commit().await.unwrap();
        let now = node.state_syncs();
        costs.push((what, now - seen));
        seen = now;
        costs.clone()
    };
    plugin
        .synchronize(api::SynchronizeRequest::default())
        .await
        .unwrap();
    cost("Synchronize".into()).await;
    for n in 0..2u8 {
        let request = api::CreateContainerRequest {
            pod: Some(sandbox(n)),
            container: Some(container(n)),
        };
        let created = plugin.create_container(request).await.unwrap();
        assert!(created.adjust.is_some(), "container {n} admitted");
        cost(format!("CreateContainer {n}")).await;
        // NRI v0.10: the runtime validates corral's own adjustment (accepted), and the
        // pod's resources are updated to what they are.
        let validate = api::ValidateContainerAdjustmentRequest {
            pod: Some(sandbox(n)),
            container: Some(container(n)),
            adjust: created.adjust.clone(),
            ..Default::default()
        };
        let answer = plugin
            .validate_container_adjustment(validate)
            .await
            .unwrap();
        assert!(!answer.reject, "{}", answer.reason);
        cost(format!("ValidateContainerAdjustment {n}")).await;
        let resources = container(n).linux.and_then(|l| l.resources);
        let mut pod = sandbox(n);
        pod.linux.as_mut().unwrap().pod_resources = resources.clone();
        let update = api::UpdatePodSandboxRequest {
            pod: Some(pod),
            overhead_linux_resources: None,
            linux_resources: resources,
        };
        plugin.update_pod_sandbox(update).await.unwrap();
        cost(format!("UpdatePodSandbox {n}")).await;
    }
    for n in 0..2u8 {
        let request = api::StopContainerRequest {
            pod: Some(sandbox(n)),
            container: Some(container(n)),
        };
        plugin.stop_container(request).await.unwrap();
        cost(format!("StopContainer {n}")).await;
        let event = api::StateChangeEvent {
            event: api::Event::RemoveContainer as i32,
            pod: Some(sandbox(n)),
            container: Some(container(n)),
        };
        plugin.state_change(event).await.unwrap();
        cost(format!("RemoveContainer {n}")).await;
    }
    for n in 0..2u8 {
        for event in [api::Event::StopPodSandbox, api::Event::RemovePodSandbox] {
            let change = api::StateChangeEvent {
                event: event as i32,
                pod: Some(sandbox(n)),
                container: None,
            };
            plugin.state_change(change).await.unwrap();
            cost(format!("{event:?} {n}")).await;
        }
    }
    assert!(node.pods().uids().is_empty(), "both pods released");
    let costs = cost("the end".into()).await;
    let want = |what: &str| match what.split(' ').next().unwrap() {
        "start-up" => 2,
        // A stopped container keeps what it holds while its pod runs (nothing to write);
        // the stopped sandbox gives it back, the removed one drops the pod's record.
        "CreateContainer" | "StopPodSandbox" | "RemovePodSandbox" => 1,
        _ => 0,
    };
    let wanted: Vec<(String, u64)> = costs.iter().map(|(w, _)| (w.clone(), want(w))).collect();
    assert_eq!(costs, wanted);
    let total: u64 = costs.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 8, "{costs:?}");
}

/// A container of pod `n` named `name` with id `id`: `cpu` (shares, quota in CPUs; `None`
/// for none) and a memory limit (`None` for none) — Guaranteed when both are set and the
/// shares match the quota, Burstable with shares alone, BestEffort with neither.
pub(super) fn container_of(
    n: u8,
    name: &str,
    id: &str,
    cpus: Option<(u64, i64)>,
    memory: Option<i64>,
) -> api::Container {
    api::Container {
        id: id.into(),
        pod_sandbox_id: format!("sb-{n}"),
        name: name.into(),
        state: api::ContainerState::ContainerRunning as i32,
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: cpus.map(|(shares, quota)| api::LinuxCpu {
                    shares: Some(api::OptionalUInt64 { value: shares }),
                    quota: (quota > 0).then_some(api::OptionalInt64 { value: quota }),
                    period: (quota > 0).then_some(api::OptionalUInt64 { value: 100_000 }),
                    ..Default::default()
                }),
                memory: memory.map(|limit| api::LinuxMemory {
                    limit: Some(api::OptionalInt64 { value: limit }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Repeated, duplicate and unknown events change nothing and cost nothing; each event
/// that changes something (BestEffort, Burstable and Guaranteed containers, a container
/// joining its pod, stops and removals) costs at most one sync; a container refused for
/// more CPUs than the node has changes nothing and costs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_unknown_and_refused_nri_events_cost_nothing() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    node.commit().await.unwrap();
    let mut seen = node.state_syncs();
    let mut costs: Vec<(String, u64, u64)> = Vec::new();
    // (what, syncs it cost, syncs it may cost at most)
    let mut cost = async |what: &str, most: u64| {
        node.commit().await.unwrap();
        let now = node.state_syncs();
        costs.push((what.to_owned(), now - seen, most));
        seen = now;
        costs.clone()
    };
    let guaranteed = |n: u8, name: &str, id: &str| {
        container_of(n, name, id, Some((2048, 200_000)), Some(64 << 20))
    };
    let create = |n: u8, c: api::Container| api::CreateContainerRequest {
        pod: Some(sandbox(n)),
        container: Some(c),
    };
    let change = |event: api::Event, n: u8, c: Option<api::Container>| api::StateChangeEvent {
        event: event as i32,
        pod: Some(sandbox(n)),
        container: c,
    };
    // Nothing known yet: events about unknown pods and containers.
    plugin
        .synchronize(api::SynchronizeRequest::default())
        .await
        .unwrap();
    cost("Synchronize, nothing", 0).await;
    plugin
        .state_change(change(
            api::Event::RemoveContainer,
            7,
            Some(guaranteed(7, "c", "c-unknown")),
        ))
        .await
        .unwrap();
    cost("RemoveContainer unknown", 0).await;
    plugin
        .stop_container(api::StopContainerRequest {
            pod: Some(sandbox(7)),
            container: Some(guaranteed(7, "c", "c-unknown")),
        })
        .await
        .unwrap();
    cost("StopContainer unknown", 0).await;
    for event in [api::Event::StopPodSandbox, api::Event::RemovePodSandbox] {
        plugin.state_change(change(event, 7, None)).await.unwrap();
        cost(&format!("{event:?} unknown"), 0).await;
    }
    // A Guaranteed container, then the same CreateContainer again.
    let created = plugin
        .create_container(create(0, guaranteed(0, "c", "c-0")))
        .await
        .unwrap();
    assert!(created.adjust.is_some());
    cost("CreateContainer 0", 1).await;
    let again = plugin
        .create_container(create(0, guaranteed(0, "c", "c-0")))
        .await
        .unwrap();
    assert_eq!(again.adjust, created.adjust, "the same answer");
    cost("CreateContainer 0 again", 0).await;
    // The runtime's state as it is: nothing to do.
    let sync = api::SynchronizeRequest {
        pods: vec![sandbox(0)],
        containers: vec![guaranteed(0, "c", "c-0")],
        more: false,
    };
    plugin.synchronize(sync.clone()).await.unwrap();
    cost("Synchronize, the state as it is", 0).await;
    plugin.synchronize(sync).await.unwrap();
    cost("Synchronize, the state as it is, again", 0).await;
    // A resize to the same resources.
    let same = guaranteed(0, "c", "c-0");
    let update = api::UpdateContainerRequest {
        pod: Some(sandbox(0)),
        container: Some(same.clone()),
        linux_resources: same.linux.as_ref().and_then(|l| l.resources.clone()),
    };
    plugin.update_container(update).await.unwrap();
    cost("UpdateContainer unchanged", 0).await;
    // A second container joining pod 0, then a refused one (more CPUs than exist).
    plugin
        .create_container(create(0, guaranteed(0, "d", "d-0")))
        .await
        .unwrap();
    cost("CreateContainer 0/d joins", 1).await;
    let huge = container_of(
        0,
        "huge",
        "huge-0",
        Some((1024 * 1000, 100_000_000)),
        Some(64 << 20),
    );
    assert!(
        plugin
            .create_container(create(0, huge.clone()))
            .await
            .is_err(),
        "refused"
    );
    cost("CreateContainer 0/huge refused", 0).await;
    assert!(
        plugin.create_container(create(0, huge)).await.is_err(),
        "refused"
    );
    cost("CreateContainer 0/huge refused again", 0).await;
    let lone_huge = container_of(
        3,
        "c",
        "c-3",
        Some((1024 * 1000, 100_000_000)),
        Some(64 << 20),
    );
    assert!(
        plugin.create_container(create(3, lone_huge)).await.is_err(),
        "refused"
    );
    cost("CreateContainer 3 (a new pod) refused", 0).await;
    // BestEffort and Burstable pods, each container twice.
    let best_effort = container_of(1, "c", "c-1", None, None);
    plugin
        .create_container(create(1, best_effort.clone()))
        .await
        .unwrap();
    cost("CreateContainer 1 BestEffort", 1).await;
    plugin
        .create_container(create(1, best_effort))
        .await
        .unwrap();
    cost("CreateContainer 1 BestEffort again", 0).await;
    let burstable = container_of(2, "c", "c-2", Some((512, 0)), None);
    plugin
        .create_container(create(2, burstable.clone()))
        .await
        .unwrap();
    cost("CreateContainer 2 Burstable", 1).await;
    plugin
        .create_container(create(2, burstable.clone()))
        .await
        .unwrap();
    cost("CreateContainer 2 Burstable again", 0).await;
    let burstable_limited = container_of(2, "d", "d-2", Some((512, 200_000)), Some(64 << 20));
    plugin
        .create_container(create(2, burstable_limited))
        .await
        .unwrap();
    cost("CreateContainer 2/d Burstable joins", 1).await;
    // Stops and removals, each twice.
    for (n, c) in [(0, guaranteed(0, "c", "c-0")), (2, burstable)] {
        for again in ["", " again"] {
            plugin
                .stop_container(api::StopContainerRequest {
                    pod: Some(sandbox(n)),
                    container: Some(c.clone()),
                })
                .await
                .unwrap();
            cost(
                &format!("StopContainer {n}{again}"),
                if again.is_empty() { 1 } else { 0 },
            )
            .await;
        }
        for again in ["", " again"] {
            plugin
                .state_change(change(api::Event::RemoveContainer, n, Some(c.clone())))
                .await
                .unwrap();
            cost(&format!("RemoveContainer {n}{again}"), 0).await;
        }
    }
    // Sandboxes: the first stop removes the containers still live (a change), the first
    // removal releases the pod (a change); the repeats change nothing.
    for n in 0..3u8 {
        for (event, most) in [
            (api::Event::StopPodSandbox, 1),
            (api::Event::StopPodSandbox, 0),
            (api::Event::RemovePodSandbox, 1),
            (api::Event::RemovePodSandbox, 0),
            (api::Event::StopPodSandbox, 0),
        ] {
            plugin.state_change(change(event, n, None)).await.unwrap();
            cost(&format!("{event:?} {n}"), most).await;
        }
    }
    assert!(node.pods().uids().is_empty(), "every pod released");
    let costs = cost("the end", 0).await;
    let over: Vec<_> = costs.iter().filter(|(_, cost, most)| cost > most).collect();
    assert!(
        over.is_empty(),
        "events over their cost: {over:?}\nall: {costs:?}"
    );
}

/// A pod of two live containers stopped (`StopPodSandbox`), and a Synchronize after which
/// the runtime has two pods fewer: one event each, one sync each at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_event_that_changes_several_containers_costs_one_sync() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    let guaranteed = |n: u8, name: &str| {
        container_of(
            n,
            name,
            &format!("{name}-{n}"),
            Some((2048, 200_000)),
            Some(64 << 20),
        )
    };
    for n in 0..3u8 {
        for name in ["a", "b"] {
            let request = api::CreateContainerRequest {
                pod: Some(sandbox(n)),
                container: Some(guaranteed(n, name)),
            };
            plugin.create_container(request).await.unwrap();
        }
    }
    node.commit().await.unwrap();
    let before = node.state_syncs();
    let stop = api::StateChangeEvent {
        event: api::Event::StopPodSandbox as i32,
        pod: Some(sandbox(0)),
        container: None,
    };
    plugin.state_change(stop).await.unwrap();
    node.commit().await.unwrap();
    let stopped = node.state_syncs() - before;
    let before = node.state_syncs();
    // The runtime now has pod 0 alone: pods 1 and 2 (two containers each) are gone.
    let sync = api::SynchronizeRequest {
        pods: vec![sandbox(0)],
        containers: Vec::new(),
        more: false,
    };
    plugin.synchronize(sync).await.unwrap();
    node.commit().await.unwrap();
    let synchronized = node.state_syncs() - before;
    assert_eq!(node.pods().uids().len(), 1, "pods 1 and 2 released");
    assert_eq!(
        (stopped, synchronized),
        (1, 1),
        "(StopPodSandbox of two live containers, Synchronize releasing two pods)"
    );
}

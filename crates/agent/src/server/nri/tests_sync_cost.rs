//! What the NRI scenario costs in fsync/fdatasync calls: two pods of one container each,
//! after one Synchronize, through their whole lives (create, start, stop, remove, sandbox
//! stopped and removed). Each event's count is asserted.

use corral_proto::nri::api;
use corral_proto::nri::plugin::NriPlugin;

use super::plugin::NodePlugin;
use crate::node::tests::started;

fn sandbox(n: u8) -> api::PodSandbox {
    api::PodSandbox {
        id: format!("sb-{n}"),
        name: format!("p{n}"),
        uid: format!("uid-{n}"),
        namespace: "default".into(),
        linux: Some(api::LinuxPodSandbox {
            cgroup_parent: format!("/kubepods/poduid-{n}"),
            ..Default::default()
        }),
        ..Default::default()
    }
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
    let plugin = NodePlugin::new(node.clone(), "/nonexistent/kubelet.sock".into());
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
        "CreateContainer" | "StopContainer" | "RemovePodSandbox" => 1,
        _ => 0,
    };
    let wanted: Vec<(String, u64)> = costs.iter().map(|(w, _)| (w.clone(), want(w))).collect();
    assert_eq!(costs, wanted);
    let total: u64 = costs.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 8, "{costs:?}");
}

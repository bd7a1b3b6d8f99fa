//! A Guaranteed container the runtime stops and creates again in its running pod (a crash
//! and the kubelet's restart) gets its own CPUs back, as under the kubelet, whose
//! `PostStopContainer` tells only the topology manager: the stop changes no pool and writes
//! nothing. Once its pod's sandbox stopped, what it held went back; created again, it is
//! admitted again and runs on exclusive CPUs, never on the shared pool.

use corral_proto::nri::api;
use corral_proto::nri::plugin::NriPlugin;
use corral_topology::CpuSet;

use super::plugin::NodePlugin;
use super::tests_sync_cost::{container_of, sandbox};
use crate::config::PinnedCpusets;
use crate::node::tests::started;

fn guaranteed(n: u8, id: &str) -> api::Container {
    container_of(n, "c", id, Some((2048, 200_000)), Some(64 << 20))
}

fn create(n: u8, c: api::Container) -> api::CreateContainerRequest {
    api::CreateContainerRequest {
        pod: Some(sandbox(n)),
        container: Some(c),
    }
}

fn stop(n: u8, c: api::Container) -> api::StopContainerRequest {
    api::StopContainerRequest {
        pod: Some(sandbox(n)),
        container: Some(c),
    }
}

fn event(event: api::Event, n: u8, c: Option<api::Container>) -> api::StateChangeEvent {
    api::StateChangeEvent {
        event: event as i32,
        pod: Some(sandbox(n)),
        container: c,
    }
}

/// The cpuset a CreateContainer answer gives the container.
fn cpus(answer: &api::CreateContainerResponse) -> CpuSet {
    let linux = answer.adjust.as_ref().and_then(|a| a.linux.as_ref());
    let cpu = linux
        .and_then(|l| l.resources.as_ref())
        .and_then(|r| r.cpu.as_ref());
    cpu.expect("a cpuset").cpus.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_guaranteed_container_gets_its_own_cpus_back() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    let first = plugin
        .create_container(create(0, guaranteed(0, "c-0")))
        .await
        .unwrap();
    let own = cpus(&first);
    assert_eq!(own.len(), 2, "{own}");
    let pool = node.cpu().state().default_cpu_set().clone();
    assert!(!pool.intersects(&own));
    node.commit().await.unwrap();
    let syncs = node.state_syncs();

    // Crash: stopped, then removed. Nothing goes back, nothing is written.
    let stopped = plugin
        .stop_container(stop(0, guaranteed(0, "c-0")))
        .await
        .unwrap();
    assert!(stopped.update.is_empty(), "{:?}", stopped.update);
    plugin
        .state_change(event(
            api::Event::RemoveContainer,
            0,
            Some(guaranteed(0, "c-0")),
        ))
        .await
        .unwrap();
    node.commit().await.unwrap();
    assert_eq!(node.state_syncs(), syncs, "a stop writes nothing");
    assert_eq!(node.cpu().state().default_cpu_set(), &pool);
    assert_eq!(node.cpu().exclusive_cpus("uid-0", "c"), own);

    // Meanwhile another Guaranteed pod cannot take them.
    let other = plugin
        .create_container(create(1, guaranteed(1, "c-1")))
        .await
        .unwrap();
    assert!(!cpus(&other).intersects(&own));

    // The restart: a new id, the same CPUs.
    let again = plugin
        .create_container(create(0, guaranteed(0, "c-0b")))
        .await
        .unwrap();
    assert_eq!(cpus(&again), own);
    let status = corral_cpumgr::PodSource::pod_status(node.pods().as_ref(), "uid-0").unwrap();
    assert_eq!(status.container_statuses[0].container_id, "cri://c-0b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_created_again_after_its_sandbox_stopped_is_admitted_again() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    let all = node.cpu().state().default_cpu_set().clone();
    let first = plugin
        .create_container(create(0, guaranteed(0, "c-0")))
        .await
        .unwrap();
    let own = cpus(&first);
    plugin
        .stop_container(stop(0, guaranteed(0, "c-0")))
        .await
        .unwrap();
    plugin
        .state_change(event(api::Event::StopPodSandbox, 0, None))
        .await
        .unwrap();
    assert_eq!(node.cpu().state().default_cpu_set(), &all, "given back");
    assert!(node.cpu().exclusive_cpus("uid-0", "c").is_empty());

    // A new sandbox of the same pod (the kubelet recreates a sandbox that died): the
    // container is decided again and runs on CPUs of its own.
    let again = plugin
        .create_container(create(0, guaranteed(0, "c-0b")))
        .await
        .unwrap();
    let given = cpus(&again);
    assert_eq!(given.len(), 2, "{given}");
    assert_eq!(node.cpu().exclusive_cpus("uid-0", "c"), given);
    assert!(!node.cpu().state().default_cpu_set().intersects(&given));
    assert_eq!(given, own, "the same decision on the same free CPUs");
    let record = node.pods().get("uid-0").unwrap().record;
    assert!(record.removed_containers.is_empty(), "{record:?}");
    assert_eq!(
        record.holdings.unwrap()["c"].exclusive_cpus.as_deref(),
        Some(own.to_string().as_str())
    );

    // Released at the end: everything back.
    plugin
        .state_change(event(api::Event::RemovePodSandbox, 0, None))
        .await
        .unwrap();
    assert_eq!(node.cpu().state().default_cpu_set(), &all);
}

/// A Synchronize after corral restarted: a recorded container the runtime reports stopped,
/// or no longer has, is stopped for the reconcile (no cpuset pushed to it) and keeps its
/// CPUs; created again, it runs on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronize_tells_which_recorded_containers_no_longer_run() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    let own = cpus(
        &plugin
            .create_container(create(0, guaranteed(0, "c-0")))
            .await
            .unwrap(),
    );
    let shared = container_of(1, "s", "s-1", Some((256, 0)), None);
    plugin
        .create_container(create(1, shared.clone()))
        .await
        .unwrap();
    let mut stopped = guaranteed(0, "c-0");
    stopped.state = api::ContainerState::ContainerStopped as i32;
    for containers in [vec![stopped, shared.clone()], vec![shared.clone()]] {
        let answer = plugin
            .synchronize(api::SynchronizeRequest {
                pods: vec![sandbox(0), sandbox(1)],
                containers,
                more: false,
            })
            .await
            .unwrap();
        let ids: Vec<&str> = answer
            .update
            .iter()
            .map(|u| u.container_id.as_str())
            .collect();
        assert_eq!(ids, ["s-1"], "only the running container is updated");
        let status = corral_cpumgr::PodSource::pod_status(node.pods().as_ref(), "uid-0").unwrap();
        assert_eq!(status.container_statuses[0].container_id, "", "not running");
        assert_eq!(node.cpu().exclusive_cpus("uid-0", "c"), own);
    }
    let again = plugin
        .create_container(create(0, guaranteed(0, "c-0b")))
        .await
        .unwrap();
    assert_eq!(cpus(&again), own);
}

/// An init container that ran (stopped before the pod's next container is created) gives
/// its CPUs back for the app container, the reuse the kubelet gives; the app container
/// then keeps its own across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_init_containers_cpus_go_to_the_app_container() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    let init = container_of(0, "init", "init-0", Some((2048, 200_000)), Some(64 << 20));
    let app = container_of(0, "app", "app-0", Some((2048, 200_000)), Some(64 << 20));
    let init_cpus = cpus(
        &plugin
            .create_container(create(0, init.clone()))
            .await
            .unwrap(),
    );
    plugin.stop_container(stop(0, init)).await.unwrap();
    assert_eq!(
        node.cpu().exclusive_cpus("uid-0", "init"),
        init_cpus,
        "kept until then"
    );
    let app_cpus = cpus(
        &plugin
            .create_container(create(0, app.clone()))
            .await
            .unwrap(),
    );
    assert_eq!(app_cpus, init_cpus, "the init container's CPUs, free again");
    assert!(node.cpu().exclusive_cpus("uid-0", "init").is_empty());
    let record = node.pods().get("uid-0").unwrap().record;
    assert!(record.removed_containers.contains("init"), "{record:?}");
    plugin.stop_container(stop(0, app)).await.unwrap();
    let restarted = container_of(0, "app", "app-0b", Some((2048, 200_000)), Some(64 << 20));
    let again = cpus(&plugin.create_container(create(0, restarted)).await.unwrap());
    assert_eq!(again, app_cpus);
}

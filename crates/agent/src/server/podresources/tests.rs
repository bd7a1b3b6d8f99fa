//! The podresources answers against upstream's `server_v1_test.go` (v1.36, with the v1.37
//! pod-level rows), rows ported as facts: which containers a pod lists, in which order,
//! the pod-level CPU set, and `Get` of a pod that does not exist.

use corral_proto::podresources::v1 as api;
use corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesLister;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use tonic::Request;

use super::PodResourcesService;
use crate::node::tests::{admitted, fixture, fixture_memory, gated_config, open_on};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

/// A node with the static CPU policy (CPU 0 reserved) under `gates`, at pod scope.
async fn service(gates: &[(&str, bool)]) -> (tempfile::TempDir, PodResourcesService) {
    let dir = tempfile::tempdir().unwrap();
    let config = gated_config(dir.path(), "pod", gates);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
    (dir, PodResourcesService::new(node))
}

/// `pod-name` in `pod-namespace` (upstream's names) with an init container
/// `init-container-name` (a sidecar when `restartable`) and `container-name`, each
/// Guaranteed with `cpus` CPUs; with pod-level resources of `pod_cpus` when given.
fn pod(restartable: bool, cpus: u32, pod_cpus: Option<u32>) -> K8sPod {
    let container = |name: &str| {
        let mut c = serde_json::json!({
            "name": name,
            "resources": {"limits": {"cpu": cpus.to_string(), "memory": "64Mi"}},
        });
        if restartable && name == "init-container-name" {
            c["restartPolicy"] = "Always".into();
        }
        c
    };
    let mut spec = serde_json::json!({
        "initContainers": [container("init-container-name")],
        "containers": [container("container-name")],
    });
    if let Some(n) = pod_cpus {
        spec["resources"] = serde_json::json!({"limits": {"cpu": n.to_string(), "memory": "1Gi"}});
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod-name", "namespace": "pod-namespace", "uid": "pod-uid"},
        "spec": spec,
    }))
    .unwrap()
}

async fn list(service: &PodResourcesService) -> Vec<api::PodResources> {
    let answer = service
        .list(Request::new(api::ListPodResourcesRequest {}))
        .await
        .unwrap();
    answer.into_inner().pod_resources
}

fn names(pod: &api::PodResources) -> Vec<&str> {
    pod.containers.iter().map(|c| c.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_container_is_not_listed() {
    // TestListPodResourcesWithInitContainersV1, "pod having an init container".
    let (_dir, service) = service(&[]).await;
    admitted(&service.node, pod(false, 2, None)).await;
    let pods = list(&service).await;
    assert_eq!(pods.len(), 1);
    assert_eq!(
        (pods[0].name.as_str(), pods[0].namespace.as_str()),
        ("pod-name", "pod-namespace")
    );
    assert_eq!(names(&pods[0]), ["container-name"]);
    assert_eq!(pods[0].containers[0].cpu_ids.len(), 2);
    // Not managed at pod level: no pod-level CPUs or memory (v1.36 has no such fields).
    assert!(pods[0].cpu_ids.is_empty() && pods[0].memory.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restartable_init_container_is_listed_first() {
    // TestListPodResourcesWithInitContainersV1, "pod having a restartable init container";
    // TestGetPodResourcesWithInitContainersV1 gives the same for Get.
    let (_dir, service) = service(&[]).await;
    admitted(&service.node, pod(true, 2, None)).await;
    let pods = list(&service).await;
    assert_eq!(names(&pods[0]), ["init-container-name", "container-name"]);
    let sidecar: Vec<i64> = pods[0].containers[0].cpu_ids.clone();
    let app: Vec<i64> = pods[0].containers[1].cpu_ids.clone();
    assert_eq!((sidecar.len(), app.len()), (2, 2));
    assert!(
        sidecar.iter().all(|c| !app.contains(c)),
        "{sidecar:?} {app:?}"
    );
    let got = service
        .get(Request::new(api::GetPodResourcesRequest {
            pod_name: "pod-name".into(),
            pod_namespace: "pod-namespace".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.pod_resources.as_ref(), Some(&pods[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_managed_at_pod_level_reports_its_whole_cpu_set() {
    // TestListPodResourcesWithInitContainersV1 (v1.37), "pod having a restartable init
    // container AND pod level resources enabled": the pod's CPUs at pod level (containers'
    // exclusive CPUs included), each container's own CPUs beside.
    let (_dir, service) = service(&[("PodLevelResourceManagers", true)]).await;
    admitted(&service.node, pod(true, 1, Some(5))).await;
    let pods = list(&service).await;
    assert_eq!(names(&pods[0]), ["init-container-name", "container-name"]);
    let pod_cpus = &pods[0].cpu_ids;
    assert_eq!(pod_cpus.len(), 5, "{pods:?}");
    for container in &pods[0].containers {
        assert_eq!(container.cpu_ids.len(), 1, "{container:?}");
        assert!(pod_cpus.contains(&container.cpu_ids[0]), "{pods:?}");
    }
    // The memory manager is off here: no pod-level memory.
    assert!(pods[0].memory.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_of_a_pod_that_does_not_exist_is_upstreams_error() {
    // TestGetPodResourcesV1, "pod not exist": a plain Go error, which gRPC sends as UNKNOWN.
    let (_dir, service) = service(&[]).await;
    let err = service
        .get(Request::new(api::GetPodResourcesRequest {
            pod_name: "pod-name".into(),
            pod_namespace: "pod-namespace".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(
        err.message(),
        "pod pod-name in namespace pod-namespace not found"
    );
}

//! The accounting attacked with crafted device lists and large machines: devices on two
//! NUMA nodes, on NUMA nodes the machine lacks (negative, absent, huge ids) or on none,
//! unhealthy devices, a plugin with thousands of devices flapping its health under a
//! publisher, an admission published half done that then fails, a 64-NUMA machine and
//! memory-only NUMA nodes; what the object says, what it costs to take, and that
//! it fits the body limit with room to spare.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_nrt::{NodeResourceTopology, ResourceInfo, Zone};
use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerAllocateResponse, Device as ApiDevice,
    DevicePluginOptions, Empty, ListAndWatchResponse, NumaNode, PreStartContainerRequest,
    PreStartContainerResponse, PreferredAllocationRequest, PreferredAllocationResponse,
    TopologyInfo, device_plugin_server::DevicePlugin,
};
use tonic::codegen::tokio_stream::{Stream, wrappers::UnboundedReceiverStream};
use tonic::{Request, Response, Status};

use super::accounting::Accounting;
use super::kube_api::MAX_BODY_BYTES;
use super::pods_fingerprint::exclusive_pods_fingerprint;
use super::tests_fake_server::{FakeServer, Harness};
use crate::node::tests::WAIT;
use crate::node::tests_concurrent::{config, guaranteed, machine, open};
use crate::node::tests_gated_plugin::{GPU, GatedPlugin, Held, Served};
use crate::node::{Admission, Node};

const NIC: &str = "example.com/nic";

type ListItem = Result<ListAndWatchResponse, Status>;
type ListStream = Pin<Box<dyn Stream<Item = ListItem> + Send>>;

/// A device plugin whose device list the test sends, any number of times.
#[derive(Clone)]
struct Lists {
    rx: Arc<Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<ListItem>>>>,
}

#[tonic::async_trait]
impl DevicePlugin for Lists {
    type ListAndWatchStream = ListStream;

    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(DevicePluginOptions::default()))
    }

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        match self.rx.lock().unwrap().take() {
            Some(rx) => Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx)))),
            None => Err(Status::unavailable("listed once")),
        }
    }

    async fn get_preferred_allocation(
        &self,
        _: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        Err(Status::unimplemented("no preference"))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let n = request.into_inner().container_requests.len();
        Ok(Response::new(AllocateResponse {
            container_responses: vec![ContainerAllocateResponse::default(); n],
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

/// A registered [`Lists`] plugin and the sender of its lists.
struct Plugin {
    tx: tokio::sync::mpsc::UnboundedSender<ListItem>,
    served: Served,
}

impl Plugin {
    async fn start(node: &Arc<Node>, first: Vec<ApiDevice>) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tx.send(Ok(ListAndWatchResponse { devices: first }))
            .unwrap();
        let service = Lists {
            rx: Arc::new(Mutex::new(Some(rx))),
        };
        let options = DevicePluginOptions::default();
        let served = Served::start(node, "lists.sock", NIC, options, service).await;
        Self { tx, served }
    }

    fn list(&self, devices: Vec<ApiDevice>) {
        let _ = self.tx.send(Ok(ListAndWatchResponse { devices }));
    }

    /// Its stream fails (what the device manager sees of a crash).
    fn die(&self) {
        let _ = self.tx.send(Err(Status::unavailable("the plugin crashed")));
    }

    async fn stop(mut self) {
        self.served.stop().await;
    }
}

/// Device `id` on NUMA nodes `numa` (`None`: no topology), healthy or not.
fn device(id: &str, numa: Option<&[i64]>, healthy: bool) -> ApiDevice {
    ApiDevice {
        id: id.to_owned(),
        health: if healthy { "Healthy" } else { "Unhealthy" }.to_owned(),
        topology: numa.map(|ids| TopologyInfo {
            nodes: ids.iter().map(|&id| NumaNode { id }).collect(),
        }),
    }
}

/// Wait (bounded) until the accounting's object satisfies `cond`; return it.
async fn taken_when(
    accounting: &Accounting,
    node: &Node,
    what: &str,
    cond: impl Fn(&NodeResourceTopology) -> bool,
) -> NodeResourceTopology {
    let deadline = Instant::now() + WAIT;
    loop {
        let nrt = accounting.take(node);
        if cond(&nrt) {
            return nrt;
        }
        assert!(Instant::now() < deadline, "never {what}: {nrt:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn zone_names(nrt: &NodeResourceTopology) -> Vec<&str> {
    nrt.zones.iter().map(|z| z.name.as_str()).collect()
}

/// `(capacity, allocatable, available)` of `resource` in zone `name`, if listed there.
fn counts(nrt: &NodeResourceTopology, name: &str, resource: &str) -> Option<(u64, u64, u64)> {
    let info = nrt.zone(name)?.resource(resource)?;
    let n = |q: &corral_nrt::Quantity| q.0.parse::<u64>().unwrap();
    Some((n(&info.capacity), n(&info.allocatable), n(&info.available)))
}

#[tokio::test]
async fn devices_on_two_nodes_absent_nodes_and_no_node() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let accounting = Accounting::new("n", &config.cpu_manager);
    let devices = vec![
        device("both", Some(&[0, 1]), true),
        device("twice-on-0", Some(&[0, 0]), true),
        device("on-0-and-absent-7", Some(&[0, 7]), true),
        device("absent-7", Some(&[7]), true),
        device("negative", Some(&[-1]), true),
        device("huge", Some(&[i64::MAX]), true),
        device("empty-topology", Some(&[]), true),
        device("no-topology", None, true),
        device("sick-on-1", Some(&[1]), false),
    ];
    let plugin = Plugin::start(&node, devices).await;
    let nrt = taken_when(&accounting, &node, "listed the NICs", |nrt| {
        counts(nrt, "node-0", NIC).is_some()
    })
    .await;
    // No zone for a NUMA node the machine lacks.
    assert_eq!(zone_names(&nrt), ["node-0", "node-1"]);
    // node-0: `both`, `twice-on-0` (once), `on-0-and-absent-7`.
    assert_eq!(counts(&nrt, "node-0", NIC), Some((3, 3, 3)));
    // node-1: `both`, and the unhealthy one in capacity only.
    assert_eq!(counts(&nrt, "node-1", NIC), Some((2, 1, 1)));

    // The plugin says the sick one recovered and `both` fell ill.
    plugin.list(vec![
        device("both", Some(&[0, 1]), false),
        device("sick-on-1", Some(&[1]), true),
    ]);
    let nrt = taken_when(&accounting, &node, "saw the new list", |nrt| {
        counts(nrt, "node-0", NIC) == Some((1, 0, 0))
    })
    .await;
    assert_eq!(counts(&nrt, "node-1", NIC), Some((2, 1, 1)));
    // Devices only on absent nodes: in no zone at all, and no zone for their nodes.
    plugin.list(vec![
        device("absent-7", Some(&[7]), true),
        device("no-topology", None, true),
    ]);
    let nrt = taken_when(&accounting, &node, "dropped the NICs", |nrt| {
        nrt.zones.iter().all(|z| z.resource(NIC).is_none())
    })
    .await;
    assert_eq!(zone_names(&nrt), ["node-0", "node-1"]);
    // An id listed twice: the last occurrence counts (the device manager's rule), once.
    plugin.list(vec![
        device("dup", Some(&[0]), true),
        device("dup", Some(&[1]), false),
        device("other", Some(&[1]), true),
    ]);
    let nrt = taken_when(&accounting, &node, "took the duplicate", |nrt| {
        counts(nrt, "node-1", NIC).is_some()
    })
    .await;
    assert_eq!(counts(&nrt, "node-1", NIC), Some((2, 1, 1)));
    assert_eq!(counts(&nrt, "node-0", NIC), None);
    // The plugin dies: its devices turn unhealthy at once, and stay in capacity.
    plugin.die();
    let nrt = taken_when(&accounting, &node, "saw the plugin die", |nrt| {
        counts(nrt, "node-1", NIC) == Some((2, 0, 0))
    })
    .await;
    assert_eq!(counts(&nrt, "node-0", NIC), None);
    plugin.stop().await;
}

/// A device plugin dies while a publisher runs: the object shows its devices unhealthy
/// without waiting for a resync (the period here is an hour).
#[tokio::test]
async fn a_dead_plugin_is_published_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let accounting = Accounting::new("worker-1", &config.cpu_manager);
    let plugin = Plugin::start(&node, vec![device("a", Some(&[0]), true)]).await;
    taken_when(&accounting, &node, "listed the NIC", |nrt| {
        counts(nrt, "node-0", NIC) == Some((1, 1, 1))
    })
    .await;
    let harness = Harness::publish(
        dir,
        Arc::clone(&node),
        accounting,
        Duration::from_secs(3600),
        Arc::new(FakeServer::default()),
    );
    harness.converged().await;
    plugin.die();
    let deadline = Instant::now() + WAIT;
    loop {
        let published = harness.server.object().unwrap();
        if counts(&published, "node-0", NIC) == Some((1, 0, 0)) {
            break;
        }
        assert!(Instant::now() < deadline, "never published: {published:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    plugin.stop().await;
    harness.stop().await;
}

/// `single-numa-node` on up to 64 NUMA nodes, static CPU and memory policies.
fn config_64(root: &std::path::Path) -> crate::config::AgentConfig {
    let source: crate::config::ConfigSource = serde_json::from_value(serde_json::json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"},
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "100Mi"}}],
    }))
    .unwrap();
    crate::config::ConfigSource {
        root: Some(root.to_path_buf()),
        ..source
    }
    .validate()
    .unwrap()
}

/// A plugin with 4096 devices over 64 NUMA nodes that flaps one device's health 200 times
/// while a publisher runs: writes stay at about one a second (measured against the elapsed
/// time), the object ends equal to the state, and taking it is cheap next to a write.
#[tokio::test]
async fn thousands_of_flapping_devices_on_64_numa_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_64(dir.path());
    let node = open(&config, &machine(64, 4, 1024, 0)).await;
    let accounting = Accounting::new("worker-1", &config.cpu_manager);
    let list = |sick: usize| -> Vec<ApiDevice> {
        (0..4096)
            .map(|i| {
                let numa = [i64::try_from(i % 64).unwrap()];
                device(&format!("nic-{i}"), Some(&numa), i != sick)
            })
            .collect()
    };
    let plugin = Plugin::start(&node, list(usize::MAX)).await;
    let nrt = taken_when(&accounting, &node, "listed 4096 NICs", |nrt| {
        counts(nrt, "node-63", NIC) == Some((64, 64, 64))
    })
    .await;
    assert_eq!(nrt.zones.len(), 64);
    let size = serde_json::to_vec(&nrt).unwrap().len();

    let server = Arc::new(FakeServer::default());
    let harness = Harness::publish(
        dir,
        Arc::clone(&node),
        accounting.clone(),
        Duration::from_secs(3600),
        server,
    );
    harness.converged().await;
    let writes = harness.stats.writes();
    let started = Instant::now();
    for flap in 0..200 {
        plugin.list(list(flap % 2));
    }
    // The last list differs from every flap: once it shows, every flap was taken.
    plugin.list(list(4095));
    taken_when(&accounting, &node, "took the last list", |nrt| {
        counts(nrt, "node-63", NIC) == Some((64, 63, 63))
            && counts(nrt, "node-0", NIC) == Some((64, 64, 64))
    })
    .await;
    harness.converged().await;
    let elapsed = started.elapsed();
    let written = harness.stats.writes() - writes;
    assert!(written >= 1, "the last list changed the object");
    assert!(
        written <= elapsed.as_secs() + 2,
        "{written} writes in {elapsed:?}"
    );
    // The cost of one take on the runtime thread, for the report.
    let timer = Instant::now();
    for _ in 0..10 {
        std::hint::black_box(accounting.take(&node));
    }
    let per_take = timer.elapsed() / 10;
    eprintln!(
        "64 NUMA nodes, 4096 devices: object {size} bytes, take {per_take:?}, {written} writes in {elapsed:?}"
    );
    plugin.stop().await;
    harness.stop().await;
}

/// `MAX_BODY_BYTES` claims a 64-NUMA object with a hundred device resources per zone is
/// under 2 MiB: build the largest such object (full SLIT, long names, big quantities) and
/// check it is under the cap with room for the server's metadata.
#[test]
fn the_largest_claimed_object_fits_the_body_cap() {
    let mut nrt = NodeResourceTopology::named(&"n".repeat(253));
    let ids: Vec<usize> = (0..64).collect();
    for &id in &ids {
        let mut zone = Zone::numa_node(id);
        zone.costs = ids
            .iter()
            .map(|&to| corral_nrt::CostInfo {
                name: corral_nrt::numa_zone_name(to),
                value: 255,
            })
            .collect();
        zone.resources
            .push(ResourceInfo::new("cpu", 4096, 4096, 4096));
        zone.resources
            .push(ResourceInfo::new("memory", u64::MAX, u64::MAX, u64::MAX));
        for r in 0..100 {
            let name = format!("vendor-with-a-long-domain.example.com/resource-{r:03}");
            zone.resources
                .push(ResourceInfo::new(&name, 1 << 20, 1 << 20, 1 << 20));
        }
        nrt.zones.push(zone);
    }
    let size = serde_json::to_vec(&nrt).unwrap().len();
    let names: BTreeSet<_> = nrt.zones.iter().map(|z| z.name.clone()).collect();
    assert_eq!(names.len(), 64);
    assert!(size < 2 << 20, "{size} bytes");
    assert!(size * 2 < MAX_BODY_BYTES, "{size} bytes");
}

/// An admission is published half done (its CPUs held while its device plugin's `Allocate`
/// is still out), then fails at the plugin: the object must come back without waiting for
/// a resync (the period here is an hour).
#[tokio::test]
async fn a_half_done_admission_that_fails_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = GatedPlugin::start(&node, &[0, 1], Held::Allocate, true).await;
    let accounting = Accounting::new("worker-1", &config.cpu_manager);
    let harness = Harness::publish(
        dir,
        Arc::clone(&node),
        accounting.clone(),
        Duration::from_secs(3600),
        Arc::new(FakeServer::default()),
    );
    let before = harness.converged().await;
    let free = |nrt: &NodeResourceTopology| -> u64 {
        ["node-0", "node-1"]
            .iter()
            .map(|z| counts(nrt, z, "cpu").unwrap().2)
            .sum()
    };
    let admitting = {
        let node = Arc::clone(&node);
        let pod = guaranteed(
            "p",
            serde_json::json!({"cpu": "2", "memory": "64Mi", GPU: "1"}),
        );
        tokio::spawn(async move { node.admit(pod, vec![]).await })
    };
    // While the plugin holds `Allocate`, some other change wakes the publisher.
    let mid = taken_when(&accounting, &node, "held the pod's CPUs", |nrt| {
        free(nrt) + 2 == free(&before)
    })
    .await;
    node.changes().bump();
    let published = harness.converged().await;
    assert_eq!(
        free(&published),
        free(&mid),
        "the half-done state was published"
    );
    plugin.open();
    let answer = tokio::time::timeout(WAIT, admitting)
        .await
        .unwrap()
        .unwrap();
    assert!(!matches!(answer, Ok(Admission::Admitted(_))), "{answer:?}");
    assert_eq!(free(&accounting.take(&node)), free(&before));
    let after = harness.converged().await;
    assert_eq!(free(&after), free(&before));
    plugin.stop().await;
    harness.stop().await;
}

/// scheduler-plugins' `IsExclusive` (resourcerequests, 903da7df) takes a non-native
/// resource any zone lists as exclusive whatever its quantity: `return
/// nrtResources.Has(resource)`, zero included. A pod that names a listed device with a
/// zero request is in the plugin's fingerprint, so it must be in corral's.
#[test]
fn a_listed_device_requested_at_zero_is_exclusive_as_upstream_says() {
    use corral_topology::{Container, Pod, ResourceList};

    let mut container = Container::new("c");
    container.resources.requests = ResourceList {
        cpu_millis: Some(100),
        ..ResourceList::default()
    };
    container
        .resources
        .requests
        .extended
        .insert("example.com/gpu".to_owned(), 0);
    let pod = Pod {
        uid: "u".into(),
        namespace: "ns".into(),
        name: "zero-gpu".into(),
        containers: vec![container],
        ..Pod::default()
    };
    let listed = BTreeSet::from(["example.com/gpu".to_owned()]);
    let mut expected = corral_nrt::PodFingerprint::new();
    expected.add("ns", "zero-gpu");
    assert_eq!(exclusive_pods_fingerprint([&pod], &listed), expected.sign());
    // Not listed: not exclusive (a Burstable pod holds nothing else).
    assert_eq!(
        exclusive_pods_fingerprint([&pod], &BTreeSet::new()),
        corral_nrt::PodFingerprint::new().sign()
    );
}

/// A GB200-like shape in small: CPUs on NUMA nodes 0 and 1, memory on 0–3 (2 and 3 are
/// memory-only, as GPU memory nodes are). Every NUMA node gets a zone with its memory; the
/// memory-only ones list no `cpu` (the plugin then refuses them any pod asking for CPUs,
/// which is right: they have none).
#[tokio::test]
async fn memory_only_numa_nodes_get_zones_without_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", "container");
    let (topology, mut memory) = machine(2, 4, 1024, 0);
    for id in [2, 3] {
        let mut numa = memory[&0].clone();
        numa.node = id;
        memory.insert(id, numa);
    }
    let node = Arc::new(
        Node::open(
            &config,
            &topology,
            &memory,
            Arc::new(crate::node::NoRuntime),
        )
        .unwrap(),
    );
    node.start_devices().await.unwrap();
    let nrt = Accounting::new("n", &config.cpu_manager).take(&node);
    assert_eq!(zone_names(&nrt), ["node-0", "node-1", "node-2", "node-3"]);
    for zone in ["node-2", "node-3"] {
        assert_eq!(counts(&nrt, zone, "cpu"), None, "{zone}");
        let (capacity, _, available) = counts(&nrt, zone, "memory").unwrap();
        assert_eq!(capacity, 1024 << 20, "{zone}");
        assert!(available > 0, "{zone}");
    }
}

/// A plugin that is gone for good: once its grace period is over, the capacity refresher
/// (upstream's `GetCapacity` with every node status) drops its resource, and the object
/// no longer lists it — not even as capacity.
#[tokio::test]
async fn a_plugin_gone_past_its_grace_period_leaves_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let source: crate::config::ConfigSource = serde_json::from_value(serde_json::json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": "single-numa-node",
        "devicePluginGracePeriod": "1s",
    }))
    .unwrap();
    let config = crate::config::ConfigSource {
        root: Some(dir.path().to_path_buf()),
        ..source
    }
    .validate()
    .unwrap();
    assert_eq!(config.device_plugin_grace_period, Duration::from_secs(1));
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let refresher = node.spawn_device_capacity_refresher(Duration::from_millis(100));
    let accounting = Accounting::new("worker-1", &config.cpu_manager);
    let plugin = Plugin::start(&node, vec![device("a", Some(&[0]), true)]).await;
    taken_when(&accounting, &node, "listed the NIC", |nrt| {
        counts(nrt, "node-0", NIC) == Some((1, 1, 1))
    })
    .await;
    plugin.stop().await;
    taken_when(&accounting, &node, "dropped the NIC", |nrt| {
        counts(nrt, "node-0", NIC).is_none()
    })
    .await;
    refresher.abort();
}

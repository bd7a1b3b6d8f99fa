//! Device admission as reserve, ask, realize against a hostile device plugin (served over a
//! real unix socket, programmable: scripted or garbage preferred allocations, calls held,
//! failing or empty `Allocate`, live device-list changes) and concurrent admissions: every
//! admission ends, nothing stays reserved or in flight, no device is given twice, a refused
//! pod holds nothing, decisions are those of a serial order, init-container reuse holds.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerAllocateResponse,
    ContainerPreferredAllocationResponse, Device as ApiDevice, DevicePluginOptions, Empty,
    ListAndWatchResponse, NumaNode, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse, TopologyInfo,
    device_plugin_server::DevicePlugin,
};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use tonic::codegen::tokio_stream::{Stream, wrappers::UnboundedReceiverStream};
use tonic::{Request, Response, Status};

use super::Node;
use super::tests::WAIT;
use super::tests_concurrent::{big_pod, config, guaranteed, machine, open, outcome};
use super::tests_gated_plugin::Served;

const GPU: &str = "example.com/gpu";
const NIC: &str = "example.com/nic";

/// (available, must_include, size, call number) → the plugin's preferred ids.
type Answerer = Box<dyn Fn(&[String], &[String], usize, usize) -> Vec<String> + Send + Sync>;

type ListItem = Result<ListAndWatchResponse, Status>;

/// A `GetPreferredAllocation` question: available ids, required ids, size.
type Question = (Vec<String>, Vec<String>, usize);

struct Ctl {
    answer: Mutex<Answerer>,
    /// `GetPreferredAllocation` calls numbered at least this wait for the gate.
    hold_preferred_from: AtomicUsize,
    /// `Allocate` calls wait for the gate.
    hold_allocate: AtomicBool,
    /// `Allocate` call `n` fails when `n % allocate_fail_every == allocate_fail_every - 1`
    /// (0: never).
    allocate_fail_every: AtomicUsize,
    /// `Allocate` answers no container response.
    allocate_empty: AtomicBool,
    /// A delay before every answer (ms).
    delay_ms: AtomicUsize,
    /// `GetPreferredAllocation` fails at once.
    preferred_fails: AtomicBool,
    gate: tokio::sync::watch::Sender<bool>,
    questions: Mutex<Vec<Question>>,
    allocations: Mutex<Vec<Vec<String>>>,
    lists_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<ListItem>>>,
    lists_tx: tokio::sync::mpsc::UnboundedSender<ListItem>,
}

impl Ctl {
    async fn pass(&self) -> Result<(), Status> {
        let mut open = self.gate.subscribe();
        match tokio::time::timeout(WAIT, open.wait_for(|o| *o)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(Status::deadline_exceeded("the gate was never opened")),
        }
    }

    async fn delay(&self) {
        let ms = self.delay_ms.load(Ordering::Relaxed);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms as u64)).await;
        }
    }
}

#[derive(Clone)]
struct Hostile {
    ctl: Arc<Ctl>,
}

type ListStream = Pin<Box<dyn Stream<Item = ListItem> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Hostile {
    type ListAndWatchStream = ListStream;

    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(options()))
    }

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let rx = self.ctl.lists_rx.lock().unwrap().take();
        match rx {
            Some(rx) => Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx)))),
            None => Err(Status::unavailable("listed once")),
        }
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let mut container_responses = Vec::new();
        let mut hold = false;
        for ask in request.into_inner().container_requests {
            let size = usize::try_from(ask.allocation_size).unwrap_or(0);
            let n = {
                let mut q = self.ctl.questions.lock().unwrap();
                q.push((
                    ask.available_device_i_ds.clone(),
                    ask.must_include_device_i_ds.clone(),
                    size,
                ));
                q.len() - 1
            };
            hold |= n >= self.ctl.hold_preferred_from.load(Ordering::Relaxed);
            let ids = (self.ctl.answer.lock().unwrap())(
                &ask.available_device_i_ds,
                &ask.must_include_device_i_ds,
                size,
                n,
            );
            container_responses.push(ContainerPreferredAllocationResponse { device_i_ds: ids });
        }
        self.ctl.delay().await;
        if self.ctl.preferred_fails.load(Ordering::Relaxed) {
            return Err(Status::internal("no preference today"));
        }
        if hold {
            self.ctl.pass().await?;
        }
        Ok(Response::new(PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let requests = request.into_inner().container_requests;
        let mut n = 0;
        for r in &requests {
            let mut a = self.ctl.allocations.lock().unwrap();
            a.push(r.devices_ids.clone());
            n = a.len() - 1;
        }
        self.ctl.delay().await;
        if self.ctl.hold_allocate.load(Ordering::Relaxed) {
            self.ctl.pass().await?;
        }
        let every = self.ctl.allocate_fail_every.load(Ordering::Relaxed);
        if every > 0 && n % every == every - 1 {
            return Err(Status::internal("the hostile plugin says no"));
        }
        if self.ctl.allocate_empty.load(Ordering::Relaxed) {
            return Ok(Response::new(AllocateResponse::default()));
        }
        Ok(Response::new(AllocateResponse {
            container_responses: requests
                .iter()
                .map(|_| ContainerAllocateResponse::default())
                .collect(),
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

fn options() -> DevicePluginOptions {
    DevicePluginOptions {
        get_preferred_allocation_available: true,
        ..DevicePluginOptions::default()
    }
}

fn device(id: &str, numa: i64, healthy: bool) -> ApiDevice {
    ApiDevice {
        id: id.to_owned(),
        health: if healthy { "Healthy" } else { "Unhealthy" }.to_owned(),
        topology: Some(TopologyInfo {
            nodes: vec![NumaNode { id: numa }],
        }),
    }
}

/// `prefix-i` on NUMA node `numa[i]`, all healthy.
fn devices(prefix: &str, numa: &[i64]) -> Vec<ApiDevice> {
    numa.iter()
        .enumerate()
        .map(|(i, &n)| device(&format!("{prefix}-{i}"), n, true))
        .collect()
}

/// The polite answer: the must-include ids, then the last available ones.
fn last_ids(available: &[String], must: &[String], size: usize, _: usize) -> Vec<String> {
    let mut ids = must.to_vec();
    for id in available.iter().rev() {
        if ids.len() >= size {
            break;
        }
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids
}

struct Plugin {
    ctl: Arc<Ctl>,
    served: Served,
}

impl Plugin {
    async fn start(node: &Arc<Node>, resource: &str, listed: Vec<ApiDevice>) -> Plugin {
        let (lists_tx, lists_rx) = tokio::sync::mpsc::unbounded_channel();
        lists_tx
            .send(Ok(ListAndWatchResponse { devices: listed }))
            .unwrap();
        let ctl = Arc::new(Ctl {
            answer: Mutex::new(Box::new(last_ids)),
            hold_preferred_from: AtomicUsize::new(usize::MAX),
            hold_allocate: AtomicBool::new(false),
            allocate_fail_every: AtomicUsize::new(0),
            allocate_empty: AtomicBool::new(false),
            delay_ms: AtomicUsize::new(0),
            preferred_fails: AtomicBool::new(false),
            gate: tokio::sync::watch::channel(false).0,
            questions: Mutex::default(),
            allocations: Mutex::default(),
            lists_rx: Mutex::new(Some(lists_rx)),
            lists_tx,
        });
        let name = format!("adv-{}.sock", resource.replace(['/', '.'], "-"));
        let service = Hostile {
            ctl: Arc::clone(&ctl),
        };
        let served = Served::start(node, &name, resource, options(), service).await;
        Plugin { ctl, served }
    }

    fn questions(&self) -> Vec<Question> {
        self.ctl.questions.lock().unwrap().clone()
    }

    fn allocations(&self) -> Vec<Vec<String>> {
        self.ctl.allocations.lock().unwrap().clone()
    }

    fn list(&self, listed: Vec<ApiDevice>) {
        let _ = self
            .ctl
            .lists_tx
            .send(Ok(ListAndWatchResponse { devices: listed }));
    }

    fn open(&self) {
        self.ctl.gate.send_replace(true);
    }

    async fn stop(mut self) {
        self.open();
        self.served.stop().await;
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        self.open();
    }
}

/// A node of 2 NUMA nodes × 4 CPUs and 1 GiB under `policy` at `scope`, with the hostile
/// plugin serving a GPU on each NUMA node of `gpus`.
async fn started(
    policy: &str,
    scope: &str,
    gpus: &[i64],
) -> (tempfile::TempDir, Arc<Node>, Plugin) {
    let dir = tempfile::tempdir().unwrap();
    let node = open(&config(dir.path(), policy, scope), &machine(2, 4, 1024, 0)).await;
    let plugin = Plugin::start(&node, GPU, devices("gpu", gpus)).await;
    (dir, node, plugin)
}

/// Poll `cond` (bounded by WAIT).
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn in_flight(node: &Arc<Node>) -> (usize, usize) {
    node.devices()
        .with_state(|s| (s.reservations_in_flight(), s.admissions_in_flight()))
}

fn held(node: &Arc<Node>, uid: &str, container: &str, resource: &str) -> BTreeSet<String> {
    node.devices()
        .container_devices(uid, container)
        .get(resource)
        .map(|a| a.device_ids().into_iter().collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Serial order: the holdings of an admitted decision whose `Allocate` later
// fails are seen by decisions taken meanwhile, even by pods that ask no device at all.
// ---------------------------------------------------------------------------------------

/// Big (5 CPUs, 1200Mi, 2 GPUs) then `b` (3 CPUs, 100Mi), one after the other, on a node
/// whose plugin's `Allocate` always fails: (big, b).
async fn serial_allocate_fails(big_first: bool) -> (String, String) {
    let (_dir, node, plugin) = started("restricted", "container", &[0, 1]).await;
    plugin.ctl.allocate_fail_every.store(1, Ordering::Relaxed);
    let b = || guaranteed("b", serde_json::json!({"cpu": "3", "memory": "100Mi"}));
    let big = || big_pod(serde_json::json!({GPU: "2"}));
    let (first, second) = if big_first {
        (big(), b())
    } else {
        (b(), big())
    };
    let first = outcome(&node.admit(first, Vec::new()).await.unwrap());
    let second = outcome(&node.admit(second, Vec::new()).await.unwrap());
    plugin.stop().await;
    node.stop_devices().await;
    if big_first {
        (first, second)
    } else {
        (second, first)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_refused_while_a_failing_allocate_was_under_way_is_decided_again() {
    let (_dir, node, plugin) = started("restricted", "container", &[0, 1]).await;
    plugin.ctl.hold_allocate.store(true, Ordering::Relaxed);
    plugin.ctl.allocate_fail_every.store(1, Ordering::Relaxed);
    let big = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit(big_pod(serde_json::json!({GPU: "2"})), Vec::new())
                .await
        }
    });
    until("big's Allocate", || !plugin.allocations().is_empty()).await;
    // `b` asks no device: it is decided at once, on big's holdings, and refused; as big's
    // allocation was under way, its refusal waits for it.
    let b = tokio::spawn({
        let node = Arc::clone(&node);
        let b = guaranteed("b", serde_json::json!({"cpu": "3", "memory": "100Mi"}));
        async move { node.admit(b, Vec::new()).await }
    });
    until("b's refusal waits", || node.realizing.waiting() == 1).await;
    // Big's Allocate fails: b is decided again, on a node without big.
    plugin.open();
    let big = tokio::time::timeout(WAIT, big)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let b = tokio::time::timeout(WAIT, b)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let got = (outcome(&big), outcome(&b));
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
    let serial = vec![
        serial_allocate_fails(true).await,
        serial_allocate_fails(false).await,
    ];
    assert!(
        serial.contains(&got),
        "no serial order gives {got:?}; serial orders give {serial:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Serial order and init-container reuse: a deferred decision leaves no reuse list behind.
// ---------------------------------------------------------------------------------------

fn init_pod(uid: &str, init: &str, app: &str) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"limits": {GPU: init}}}],
            "containers": [{"name": "app", "resources": {"limits": {GPU: app}}}],
        },
    }))
    .unwrap()
}

/// What happens to gpu-3 between a pod's decision given back and its next.
#[derive(Clone, Copy)]
enum Gpu3 {
    /// The plugin marks it unhealthy.
    Unhealthy,
    /// The plugin no longer lists it.
    Removed,
}

/// A pod's first decision gives its init container gpu-3 and is deferred for its app
/// container's question; while the plugin answers, gpu-3 turns unhealthy or leaves the
/// plugin's list. The pod's next decision starts from the devices left for reuse as they
/// were before the first: gpu-3 is given to nobody and `Allocate` never names it.
async fn a_deferred_decisions_init_reuse_does_not_outlive_it(gpu3: Gpu3) {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 0, 0]).await;
    // Hold the second question (the app container's, after the init container's).
    plugin.ctl.hold_preferred_from.store(1, Ordering::Relaxed);
    let pod = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(init_pod("p", "1", "2"), Vec::new()).await }
    });
    until("the app container's question", || {
        plugin.questions().len() >= 2
    })
    .await;
    match gpu3 {
        Gpu3::Unhealthy => {
            let mut listed = devices("gpu", &[0, 0, 0, 0]);
            listed[3].health = "Unhealthy".to_owned();
            plugin.list(listed);
        }
        Gpu3::Removed => plugin.list(devices("gpu", &[0, 0, 0])),
    }
    until("gpu-3 out of use", || {
        node.devices()
            .with_state(|s| !s.healthy_devices(GPU).contains("gpu-3"))
    })
    .await;
    plugin.open();
    let answer = tokio::time::timeout(WAIT, pod)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let init = held(&node, "p", "init", GPU);
    let app = held(&node, "p", "app", GPU);
    let allocations = plugin.allocations();
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
    assert_eq!(outcome(&answer), "admitted");
    assert!(
        !init.contains("gpu-3") && !app.contains("gpu-3"),
        "gpu-3 was allocated: init {init:?}, app {app:?}"
    );
    assert!(
        allocations.iter().flatten().all(|id| id != "gpu-3"),
        "Allocate was asked for gpu-3: {allocations:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_decisions_init_reuse_never_hands_out_a_device_turned_unhealthy() {
    a_deferred_decisions_init_reuse_does_not_outlive_it(Gpu3::Unhealthy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_decisions_init_reuse_never_hands_out_a_removed_device() {
    a_deferred_decisions_init_reuse_does_not_outlive_it(Gpu3::Removed).await;
}

// ---------------------------------------------------------------------------------------
// Hostile answers, concurrent admissions; every admission ends, nothing
// leaks, no device is given twice.
// ---------------------------------------------------------------------------------------

fn all_gpus() -> Vec<String> {
    (0..8).map(|i| format!("gpu-{i}")).collect()
}

struct Lcg(std::sync::atomic::AtomicU64);
impl Lcg {
    fn next(&self) -> u64 {
        let mut x = self.0.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.store(x, Ordering::Relaxed);
        x
    }
}

fn hostile_mode(mode: usize) -> Answerer {
    match mode {
        // Unknown ids.
        0 => Box::new(|_, _, size, n| (0..size + 1).map(|i| format!("nope-{n}-{i}")).collect()),
        // Duplicates of one available id.
        1 => Box::new(|avail, _, size, _| vec![avail[0].clone(); size * 3]),
        // More ids than asked (all devices, taken ones too).
        2 => Box::new(|_, _, _, _| all_gpus()),
        // Fewer ids than asked / nothing.
        3 => Box::new(|_, _, _, n| {
            if n % 2 == 0 {
                Vec::new()
            } else {
                vec!["gpu-0".into()]
            }
        }),
        // Only ids that are not available (taken by others or not asked about).
        4 => Box::new(|avail, _, _, _| {
            all_gpus()
                .into_iter()
                .filter(|id| !avail.contains(id))
                .collect()
        }),
        // An answer that changes every time (random subset of everything, garbage too).
        5 => {
            let rng = Lcg(std::sync::atomic::AtomicU64::new(0x9e37_79b9_7f4a_7c15));
            Box::new(move |_, _, size, _| {
                let mut ids: Vec<String> = all_gpus()
                    .into_iter()
                    .filter(|_| rng.next().is_multiple_of(2))
                    .collect();
                if rng.next().is_multiple_of(3) {
                    ids.push("garbage".into());
                }
                ids.truncate(size + (rng.next() % 3) as usize);
                ids
            })
        }
        // Huge garbage answer.
        _ => Box::new(|avail, _, _, _| {
            let mut ids: Vec<String> = (0..20_000).map(|i| format!("x{i}")).collect();
            ids.extend(avail.iter().cloned());
            ids
        }),
    }
}

async fn hostile_round(mode: usize, fail_every: usize, empty: bool) {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 0, 0, 1, 1, 1, 1]).await;
    *plugin.ctl.answer.lock().unwrap() = hostile_mode(mode);
    plugin
        .ctl
        .allocate_fail_every
        .store(fail_every, Ordering::Relaxed);
    plugin.ctl.allocate_empty.store(empty, Ordering::Relaxed);
    plugin.ctl.delay_ms.store(5, Ordering::Relaxed);
    let pods: Vec<(String, usize, bool)> = (0..7)
        .map(|i| (format!("p{i}"), 1 + i % 3, i % 2 == 0))
        .collect();
    let mut tasks = Vec::new();
    for (uid, gpus, with_init) in &pods {
        let manifest = if *with_init {
            init_pod(uid, &gpus.to_string(), &gpus.to_string())
        } else {
            guaranteed(
                uid,
                serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: gpus.to_string()}),
            )
        };
        let node = Arc::clone(&node);
        tasks.push(tokio::spawn(async move {
            node.admit(manifest, Vec::new()).await
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        let answer = tokio::time::timeout(WAIT, task)
            .await
            .unwrap_or_else(|_| panic!("mode {mode}: an admission never ended (livelock?)"))
            .unwrap()
            .unwrap();
        outcomes.push(outcome(&answer));
    }
    eprintln!(
        "mode {mode} fail_every {fail_every} empty {empty}: {} questions, {} allocations, {outcomes:?}",
        plugin.questions().len(),
        plugin.allocations().len()
    );
    assert_eq!(in_flight(&node), (0, 0), "mode {mode}: {outcomes:?}");
    let mut given: BTreeSet<String> = BTreeSet::new();
    for ((uid, gpus, with_init), out) in pods.iter().zip(&outcomes) {
        let names: &[&str] = if *with_init {
            &["init", "app"]
        } else {
            &["c0"]
        };
        let mut pod_devices = BTreeSet::new();
        for c in names {
            let h = held(&node, uid, c, GPU);
            if out == "admitted" {
                assert_eq!(h.len(), *gpus, "mode {mode}: {uid}/{c} holds {h:?}");
            }
            pod_devices.extend(h);
        }
        if out != "admitted" {
            assert!(
                pod_devices.is_empty(),
                "mode {mode}: refused {uid} holds {pod_devices:?}"
            );
            assert!(node.cpu().exclusive_cpus(uid, "c0").is_empty());
            assert!(node.memory().memory_numa_nodes(uid, "c0").is_empty());
        }
        for id in &pod_devices {
            assert!(id.starts_with("gpu-"), "mode {mode}: {uid} holds {id}");
            assert!(
                given.insert(id.clone()),
                "mode {mode}: {id} given twice ({outcomes:?})"
            );
        }
    }
    let allocated = node.devices().with_state(|s| s.allocated_devices(GPU));
    assert_eq!(allocated, given, "mode {mode}: allocated ≠ held");
    // Every question about a (pod, container) is put at most 3 times: at most 3 per
    // container in all.
    let containers: usize = pods.iter().map(|(_, _, i)| if *i { 2 } else { 1 }).sum();
    assert!(
        plugin.questions().len() <= 3 * containers,
        "mode {mode}: {} questions for {containers} containers",
        plugin.questions().len()
    );
    for (uid, _, _) in &pods {
        node.release(uid).await.unwrap();
    }
    assert!(
        node.devices()
            .with_state(|s| s.allocated_devices(GPU))
            .is_empty()
    );
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_under_concurrency_end_and_leak_nothing() {
    for mode in 0..7 {
        hostile_round(mode, 0, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_with_failing_allocates_leak_nothing() {
    for mode in [2, 5] {
        hostile_round(mode, 3, false).await;
        hostile_round(mode, 2, false).await;
    }
    hostile_round(5, 0, true).await;
}

// ---------------------------------------------------------------------------------------
// A stuck plugin delays only its own pods.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_plugin_delays_no_pod_of_another_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(
        &config(dir.path(), "best-effort", "container"),
        &machine(2, 4, 1024, 0),
    )
    .await;
    let gpus = Plugin::start(&node, GPU, devices("gpu", &[0, 0, 1, 1])).await;
    let nics = Plugin::start(&node, NIC, devices("nic", &[0, 0, 1, 1])).await;
    gpus.ctl.hold_preferred_from.store(0, Ordering::Relaxed);
    gpus.ctl.hold_allocate.store(true, Ordering::Relaxed);
    let stuck = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit(
                guaranteed(
                    "stuck",
                    serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "1"}),
                ),
                Vec::new(),
            )
            .await
        }
    });
    until("the stuck pod's question", || !gpus.questions().is_empty()).await;
    let started = std::time::Instant::now();
    for i in 0..3 {
        let pod = guaranteed(
            &format!("n{i}"),
            serde_json::json!({"cpu": "1", "memory": "100Mi", NIC: "1"}),
        );
        let answer = tokio::time::timeout(Duration::from_secs(10), node.admit(pod, Vec::new()))
            .await
            .expect("a NIC pod waited for the stuck GPU plugin")
            .unwrap();
        assert_eq!(outcome(&answer), "admitted");
    }
    // A release while the stuck pod waits.
    assert!(node.release("n0").await.unwrap());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!stuck.is_finished());
    gpus.open();
    let stuck = tokio::time::timeout(WAIT, stuck)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome(&stuck), "admitted");
    assert_eq!(in_flight(&node), (0, 0));
    gpus.stop().await;
    nics.stop().await;
    node.stop_devices().await;
}

// ---------------------------------------------------------------------------------------
// Init-container reuse still works when the app container's choice is asked about.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_reuse_survives_questions_and_a_concurrent_pod() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 0, 0, 1, 1, 1, 1]).await;
    plugin.ctl.hold_preferred_from.store(1, Ordering::Relaxed);
    let pod = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(init_pod("p", "2", "3"), Vec::new()).await }
    });
    until("the app container's question", || {
        plugin.questions().len() >= 2
    })
    .await;
    // Another pod decided meanwhile (it takes the devices the plugin prefers).
    let other = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.admit(
                guaranteed(
                    "q",
                    serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "1"}),
                ),
                Vec::new(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    plugin.open();
    let p = tokio::time::timeout(WAIT, pod)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let q = tokio::time::timeout(WAIT, other)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome(&p), "admitted");
    assert_eq!(outcome(&q), "admitted");
    let init = held(&node, "p", "init", GPU);
    let app = held(&node, "p", "app", GPU);
    let q_held = held(&node, "q", "c0", GPU);
    assert_eq!(init.len(), 2);
    assert_eq!(app.len(), 3);
    assert!(
        init.is_subset(&app),
        "the app container did not reuse init's devices: {init:?} {app:?}"
    );
    assert!(q_held.is_disjoint(&app), "{q_held:?} {app:?}");
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
}

// ---------------------------------------------------------------------------------------
// `Node::admit` runs an admission to its end when its caller stops waiting: dropped while
// its plugin is asked, or while its plugin answers `Allocate`, the pod is admitted all the
// same and nothing stays in flight.
// ---------------------------------------------------------------------------------------

/// Until the pod `uid` is admitted (bounded).
async fn until_admitted(node: &Arc<Node>, uid: &str) {
    until(&format!("{uid} admitted"), || {
        node.pods().get(uid).is_some()
    })
    .await;
}

/// Which plugin call an admission is dropped in.
#[derive(Clone, Copy)]
enum DroppedIn {
    Question,
    Allocate,
}

/// An admission of a 2-CPU, 1-GPU pod whose caller stops waiting while its plugin holds
/// the call `dropped_in`: the pod is admitted all the same, with what it was given, and
/// nothing stays in flight.
async fn a_dropped_admission_ends_all_the_same(dropped_in: DroppedIn) {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 1, 1]).await;
    match dropped_in {
        DroppedIn::Question => plugin.ctl.hold_preferred_from.store(0, Ordering::Relaxed),
        DroppedIn::Allocate => plugin.ctl.hold_allocate.store(true, Ordering::Relaxed),
    }
    let pod = guaranteed(
        "gone",
        serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "1"}),
    );
    let mut admit = Box::pin(node.admit(pod, Vec::new()));
    let called = || match dropped_in {
        DroppedIn::Question => !plugin.questions().is_empty(),
        DroppedIn::Allocate => !plugin.allocations().is_empty(),
    };
    // Polled until the plugin holds the call, then dropped.
    tokio::select! {
        _ = &mut admit => panic!("the admission ended before its plugin answered"),
        () = until("the plugin's call", called) => {}
    }
    drop(admit);
    plugin.open();
    until_admitted(&node, "gone").await;
    until("nothing in flight", || in_flight(&node) == (0, 0)).await;
    assert_eq!(node.cpu().exclusive_cpus("gone", "c0").len(), 2);
    assert_eq!(held(&node, "gone", "c0", GPU).len(), 1);
    plugin.stop().await;
    node.stop_devices().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_admission_ends_all_the_same_when_its_plugin_is_asked() {
    a_dropped_admission_ends_all_the_same(DroppedIn::Question).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_admission_ends_all_the_same_when_its_plugin_allocates() {
    a_dropped_admission_ends_all_the_same(DroppedIn::Allocate).await;
}

/// A two-container pod whose second `Allocate` fails: the first container's commit is
/// given back, and the device checkpoint does not name the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_realized_pod_leaves_no_checkpoint_entry() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 1, 1]).await;
    plugin.ctl.allocate_fail_every.store(2, Ordering::Relaxed);
    let manifest: K8sPod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "two", "namespace": "default", "uid": "two-containers-uid"},
        "spec": {"containers": [
            {"name": "c0", "resources": {"limits": {GPU: "1"}}},
            {"name": "c1", "resources": {"limits": {GPU: "1"}}},
        ]},
    }))
    .unwrap();
    let answer = tokio::time::timeout(WAIT, node.admit(manifest, Vec::new()))
        .await
        .unwrap()
        .unwrap();
    assert!(
        outcome(&answer).contains("the hostile plugin says no"),
        "{}",
        outcome(&answer)
    );
    assert_eq!(plugin.allocations().len(), 2);
    node.devices().settled().await;
    let file = node
        .devices()
        .config()
        .checkpoint_dir
        .join(corral_checkpoint::DEVICE_MANAGER_FILE);
    let bytes = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(!bytes.contains("two-containers-uid"), "{bytes}");
    assert!(
        node.devices()
            .with_state(|s| s.allocated_devices(GPU))
            .is_empty()
    );
    assert_eq!(in_flight(&node), (0, 0));
    // A pod asking every GPU is admitted now.
    let all = guaranteed("all", serde_json::json!({GPU: "4"}));
    assert_eq!(
        outcome(&node.admit(all, Vec::new()).await.unwrap()),
        "admitted"
    );
    plugin.stop().await;
    node.stop_devices().await;
}

/// A plugin whose `GetPreferredAllocation` fails after a while: the pod is refused and
/// nothing stays; the next pod is decided normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_preferred_allocation_refuses_and_leaks_nothing() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 1, 1]).await;
    // The question is held; the plugin's server is then killed and its socket removed
    // (the held call ends at the device manager's 30 s RPC deadline).
    plugin.ctl.hold_preferred_from.store(0, Ordering::Relaxed);
    let pod = guaranteed(
        "x",
        serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "1"}),
    );
    let admit = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(pod, Vec::new()).await }
    });
    until("the question", || !plugin.questions().is_empty()).await;
    // Kill the plugin's server while it holds the call.
    plugin.served.abort();
    let _ = std::fs::remove_file(
        node.devices()
            .config()
            .plugin_dir
            .join("adv-example-com-gpu.sock"),
    );
    let answer = tokio::time::timeout(WAIT, admit).await;
    plugin.open();
    let answer = answer.expect("the admission never ended").unwrap().unwrap();
    eprintln!("outcome: {}", outcome(&answer));
    assert_ne!(outcome(&answer), "admitted");
    assert!(node.cpu().exclusive_cpus("x", "c0").is_empty());
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
}

/// Pod scope: the init container's devices are reused by the app container when the
/// plugin is asked about both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_scope_init_reuse_with_questions() {
    let (_dir, node, plugin) = started("best-effort", "pod", &[0, 0, 0, 0, 1, 1, 1, 1]).await;
    let p = tokio::time::timeout(WAIT, node.admit(init_pod("p", "2", "3"), Vec::new()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome(&p), "admitted");
    let init = held(&node, "p", "init", GPU);
    let app = held(&node, "p", "app", GPU);
    assert!(
        init.is_subset(&app),
        "{init:?} {app:?} questions {:?}",
        plugin.questions()
    );
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
}

fn one_container(uid: &str, name: &str, limits: serde_json::Value) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": name, "resources": {"limits": limits}}]},
    }))
    .unwrap()
}

/// NRI: a container joining its admitted pod whose `Allocate` fails is refused; it holds
/// nothing and its pod keeps what it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_container_whose_allocate_fails_holds_nothing() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 1, 1]).await;
    plugin.ctl.allocate_fail_every.store(2, Ordering::Relaxed);
    let limits = serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "1"});
    let first = node
        .admit_container(one_container("jp", "c0", limits.clone()))
        .await
        .unwrap();
    assert_eq!(outcome(&first), "admitted");
    let c0_cpus = node.cpu().exclusive_cpus("jp", "c0");
    let c0_gpus = held(&node, "jp", "c0", GPU);
    let second = node
        .admit_container(one_container("jp", "c1", limits))
        .await
        .unwrap();
    assert!(
        outcome(&second).contains("the hostile plugin says no"),
        "{}",
        outcome(&second)
    );
    assert!(node.cpu().exclusive_cpus("jp", "c1").is_empty());
    assert!(node.memory().memory_numa_nodes("jp", "c1").is_empty());
    assert!(held(&node, "jp", "c1", GPU).is_empty());
    assert_eq!(node.cpu().exclusive_cpus("jp", "c0"), c0_cpus);
    assert_eq!(held(&node, "jp", "c0", GPU), c0_gpus);
    assert_eq!(
        node.devices().with_state(|s| s.allocated_devices(GPU)),
        c0_gpus
    );
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
}

/// NRI: a container joining its admitted pod whose devices were allocated, but whose
/// record could not be written: its admission is undone whole — CPUs, memory and devices —
/// and its pod keeps what it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_container_not_recorded_gives_back_its_devices_too() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 1, 1]).await;
    let limits = serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "1"});
    let first = node
        .admit_container(one_container("jr", "c0", limits.clone()))
        .await
        .unwrap();
    assert_eq!(outcome(&first), "admitted");
    let c0_gpus = held(&node, "jr", "c0", GPU);
    let c0_cpus = node.cpu().exclusive_cpus("jr", "c0");
    node.fail_next_join
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let err = node
        .admit_container(one_container("jr", "c1", limits.clone()))
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("injected"), "{err:#}");
    assert!(held(&node, "jr", "c1", GPU).is_empty());
    assert!(node.cpu().exclusive_cpus("jr", "c1").is_empty());
    assert!(node.memory().memory_numa_nodes("jr", "c1").is_empty());
    assert_eq!(
        node.devices().with_state(|s| s.allocated_devices(GPU)),
        c0_gpus,
        "only the pod's first container holds a GPU"
    );
    assert_eq!(node.cpu().exclusive_cpus("jr", "c0"), c0_cpus);
    // The same container again, recorded this time: it gets a GPU.
    let again = node
        .admit_container(one_container("jr", "c1", limits))
        .await
        .unwrap();
    assert_eq!(outcome(&again), "admitted");
    assert_eq!(held(&node, "jr", "c1", GPU).len(), 1);
    plugin.stop().await;
    node.stop_devices().await;
}

/// A plugin whose `GetPreferredAllocation` fails: the pod is refused as upstream refuses
/// it (an `Allocate` error in the topology manager's admission: one request, one error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_preferred_allocation_is_counted_as_a_request_and_an_error() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 1, 1]).await;
    plugin.ctl.preferred_fails.store(true, Ordering::Relaxed);
    let pod = guaranteed(
        "x",
        serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "1"}),
    );
    let answer = tokio::time::timeout(WAIT, node.admit(pod, Vec::new()))
        .await
        .unwrap()
        .unwrap();
    assert!(
        outcome(&answer).contains("no preference today"),
        "{}",
        outcome(&answer)
    );
    assert_eq!(in_flight(&node), (0, 0));
    assert!(node.cpu().exclusive_cpus("x", "c0").is_empty());
    let metrics = node.topology().metrics();
    let requests = metrics.admission_requests_total.load(Ordering::Relaxed);
    let errors = metrics.admission_errors_total.load(Ordering::Relaxed);
    plugin.stop().await;
    node.stop_devices().await;
    assert_eq!(
        (requests, errors),
        (1, 1),
        "kubelet_topology_manager_admission_{{requests,errors}}_total"
    );
}

/// NRI: a container joining its admitted pod, whose choice is asked about: the deferred
/// decisions given back leave the pod's other container as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_container_deferred_leaves_its_pod_alone() {
    let (_dir, node, plugin) = started("best-effort", "container", &[0, 0, 0, 0, 1, 1, 1, 1]).await;
    let c0 = serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "1"});
    let first = node
        .admit_container(one_container("jd", "c0", c0))
        .await
        .unwrap();
    assert_eq!(outcome(&first), "admitted");
    let c0_cpus = node.cpu().exclusive_cpus("jd", "c0");
    let c0_gpus = held(&node, "jd", "c0", GPU);
    let asked = plugin.questions().len();
    let c1 = serde_json::json!({"cpu": "2", "memory": "100Mi", GPU: "2"});
    let second = node
        .admit_container(one_container("jd", "c1", c1))
        .await
        .unwrap();
    assert_eq!(outcome(&second), "admitted");
    assert!(plugin.questions().len() > asked, "c1 was not asked about");
    assert_eq!(node.cpu().exclusive_cpus("jd", "c0"), c0_cpus);
    assert_eq!(held(&node, "jd", "c0", GPU), c0_gpus);
    let c1_gpus = held(&node, "jd", "c1", GPU);
    assert_eq!(c1_gpus.len(), 2);
    assert!(c1_gpus.is_disjoint(&c0_gpus));
    assert!(
        node.cpu()
            .exclusive_cpus("jd", "c1")
            .intersection(&c0_cpus)
            .is_empty()
    );
    assert_eq!(in_flight(&node), (0, 0));
    plugin.stop().await;
    node.stop_devices().await;
}

/// Every state file but the journal, after the device manager settled.
async fn files(
    node: &Arc<Node>,
    dir: &std::path::Path,
) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    node.devices().settled().await;
    super::tests::snapshot(dir)
}

/// A pod refused after deferrals (its plugin's preference fails the second time) or after
/// its `Allocate` failed leaves every state file as it found it (with a pod admitted
/// before, so that the files exist and say something).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_leaves_the_state_files_as_they_were() {
    for allocate_fails in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let node = open(
            &config(dir.path(), "best-effort", "container"),
            &machine(2, 4, 1024, 0),
        )
        .await;
        let plugin = Plugin::start(&node, GPU, devices("gpu", &[0, 0, 0, 0, 1, 1, 1, 1])).await;
        let first = guaranteed(
            "first",
            serde_json::json!({"cpu": "2", "memory": "300Mi", GPU: "1"}),
        );
        assert_eq!(
            outcome(&node.admit(first, Vec::new()).await.unwrap()),
            "admitted"
        );
        let before = files(&node, dir.path()).await;
        if allocate_fails {
            plugin.ctl.allocate_fail_every.store(1, Ordering::Relaxed);
        } else {
            plugin.ctl.preferred_fails.store(true, Ordering::Relaxed);
        }
        let refused = init_pod("refused", "1", "2");
        let answer = tokio::time::timeout(WAIT, node.admit(refused, Vec::new()))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(outcome(&answer), "admitted");
        let refused = guaranteed(
            "refused2",
            serde_json::json!({"cpu": "2", "memory": "200Mi", GPU: "2"}),
        );
        let answer = tokio::time::timeout(WAIT, node.admit(refused, Vec::new()))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(outcome(&answer), "admitted");
        let after = files(&node, dir.path()).await;
        assert_eq!(in_flight(&node), (0, 0));
        plugin.stop().await;
        node.stop_devices().await;
        for (path, bytes) in &before {
            let now = after.get(path);
            assert_eq!(
                now.map(|b| String::from_utf8_lossy(b).into_owned()),
                Some(String::from_utf8_lossy(bytes).into_owned()),
                "allocate_fails {allocate_fails}: {} changed",
                path.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Grants and exact undo: after every admission, refusal, failed allocation, container
// removal and release, the managers hold exactly what the admitted pods' records say, a
// refused or released pod holds nothing, and a restart on the same root is accepted.
// ---------------------------------------------------------------------------------------

/// What differs between the managers and the admitted pods' records: each container holds
/// what its record says it was granted (a container whose removal is recorded holds no
/// CPUs nor memory), every pod and container of `gone` holds nothing, and the devices
/// allocated are exactly those the records name.
fn inexact(node: &Arc<Node>, gone: &[(&str, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut recorded_gpus = BTreeSet::new();
    for admitted in node.pods().all() {
        let uid = &admitted.pod.uid;
        for (kind, container) in admitted.pod.all_containers() {
            let name = &container.name;
            let held = super::restore_check::holding_of(node, &admitted.pod, kind, container);
            let recorded = admitted
                .record
                .holdings
                .as_ref()
                .and_then(|h| h.get(name))
                .cloned()
                .unwrap_or_default();
            recorded_gpus.extend(recorded.devices.get(GPU).cloned().unwrap_or_default());
            if admitted.record.removed_containers.contains(name) {
                if held.exclusive_cpus.is_some() || !held.memory.is_empty() {
                    out.push(format!("{uid}/{name} was removed and still holds {held:?}"));
                }
                if !held.devices.is_empty() && held.devices != recorded.devices {
                    out.push(format!(
                        "{uid}/{name} was removed and holds devices {:?}, recorded {:?}",
                        held.devices, recorded.devices
                    ));
                }
            } else if held != recorded {
                out.push(format!(
                    "{uid}/{name} recorded as granted {recorded:?}, holds {held:?}"
                ));
            }
        }
    }
    for (uid, name) in gone {
        let cpus = node.cpu().exclusive_cpus(uid, name);
        let memory = node.memory().container_memory(uid, name);
        let devices = node.devices().container_devices(uid, name);
        if !cpus.is_empty() || !memory.is_empty() || !devices.is_empty() {
            out.push(format!(
                "{uid}/{name} (refused or released) holds CPUs {cpus}, memory {memory:?}, devices {devices:?}"
            ));
        }
    }
    let allocated = node.devices().with_state(|s| s.allocated_devices(GPU));
    let allocated: BTreeSet<String> = allocated.into_iter().collect();
    if allocated != recorded_gpus {
        out.push(format!(
            "GPUs allocated {allocated:?}, the records name {recorded_gpus:?}"
        ));
    }
    out
}

/// Init containers (one reusing its CPUs and GPU), a sidecar, containers joining their
/// pod (one whose `Allocate` fails, one refused for more CPUs than the node has), a pod
/// whose `Allocate` fails, a container removed, pods released: after each step the
/// managers hold exactly what the records say, and a restart on the same root holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_exact_through_failures_joins_removals_and_releases() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "best-effort", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    let plugin = Plugin::start(&node, GPU, devices("gpu", &[0, 0, 0, 1, 1, 1])).await;
    let limits = |cpu: &str, memory: &str, gpus: &str| serde_json::json!({"cpu": cpu, "memory": memory, GPU: gpus});
    let with_init: K8sPod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ip", "namespace": "default", "uid": "ip"},
        "spec": {
            "initContainers": [
                {"name": "init", "resources": {"limits": limits("2", "100Mi", "1")}},
                {"name": "side", "restartPolicy": "Always",
                 "resources": {"limits": limits("1", "50Mi", "1")}},
            ],
            "containers": [{"name": "app", "resources": {"limits": limits("2", "100Mi", "1")}}],
        },
    }))
    .unwrap();
    let mut gone: Vec<(&str, &str)> = Vec::new();
    let step = |what: &str, node: &Arc<Node>, gone: &[(&str, &str)]| {
        let wrong = inexact(node, gone);
        assert!(wrong.is_empty(), "after {what}: {wrong:#?}");
        assert_eq!(in_flight(node), (0, 0), "after {what}");
    };
    let answer = node.admit(with_init, Vec::new()).await.unwrap();
    assert_eq!(outcome(&answer), "admitted");
    step("a pod with an init container and a sidecar", &node, &gone);
    // A pod whose Allocate fails.
    plugin.ctl.allocate_fail_every.store(1, Ordering::Relaxed);
    let refused = node
        .admit(guaranteed("x", limits("1", "50Mi", "1")), Vec::new())
        .await
        .unwrap();
    assert_ne!(outcome(&refused), "admitted");
    gone.push(("x", "c0"));
    step("a pod whose Allocate failed", &node, &gone);
    // NRI: containers joining their pod one at a time.
    plugin.ctl.allocate_fail_every.store(0, Ordering::Relaxed);
    let first = node
        .admit_container(one_container("jp", "c0", limits("1", "50Mi", "1")))
        .await
        .unwrap();
    assert_eq!(outcome(&first), "admitted");
    step("a first container", &node, &gone);
    plugin.ctl.allocate_fail_every.store(1, Ordering::Relaxed);
    let failed = node
        .admit_container(one_container("jp", "c1", limits("1", "50Mi", "1")))
        .await
        .unwrap();
    assert_ne!(outcome(&failed), "admitted");
    plugin.ctl.allocate_fail_every.store(0, Ordering::Relaxed);
    gone.push(("jp", "c1"));
    step("a joining container whose Allocate failed", &node, &gone);
    let huge = node
        .admit_container(one_container("jp", "c2", limits("100", "50Mi", "1")))
        .await
        .unwrap();
    assert_ne!(outcome(&huge), "admitted");
    gone.push(("jp", "c2"));
    step("a joining container refused for its CPUs", &node, &gone);
    let joined = node
        .admit_container(one_container("jp", "c3", limits("1", "50Mi", "1")))
        .await
        .unwrap();
    assert_eq!(outcome(&joined), "admitted");
    step("a second container joining", &node, &gone);
    // Containers start; one of each pod is removed.
    for (uid, name) in [("ip", "side"), ("ip", "app"), ("jp", "c0"), ("jp", "c3")] {
        node.container_started(uid, name, &format!("{uid}-{name}"))
            .await
            .unwrap();
    }
    step("containers started", &node, &gone);
    node.container_removed("ip-app").await.unwrap();
    node.container_removed("jp-c3").await.unwrap();
    step("a container of each pod removed", &node, &gone);
    // A restart on the same root.
    plugin.stop().await;
    node.stop_devices().await;
    drop(node);
    // (`open` unwraps: a refused restart fails here.)
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    step("a restart", &node, &gone);
    // Releases, the pod whose container was removed first.
    assert!(node.release("ip").await.unwrap());
    gone.extend([("ip", "init"), ("ip", "side"), ("ip", "app")]);
    step("the pod with a removed container released", &node, &gone);
    assert!(node.release("jp").await.unwrap());
    gone.extend([("jp", "c0"), ("jp", "c3")]);
    step("the joined pod released", &node, &gone);
    assert!(node.pods().uids().is_empty());
    node.stop_devices().await;
    drop(node);
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    step("a restart after the releases", &node, &gone);
    node.stop_devices().await;
}

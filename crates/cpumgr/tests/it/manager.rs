//! The manager with real checkpoint files: kubelet-written `cpu_manager_state` files restore
//! and validate (upstream `state_checkpoint_test.go` `TestCheckpointStateRestore` shapes and
//! the conformance checkpoint vectors), restore failures name the file and the remedy, the
//! documented deviations (none → static migration, #112228), reconciliation rules
//! (`cpu_manager_test.go` `TestReconcileState` shapes) and stale-state removal.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use corral_checkpoint::{CPU_MANAGER_FILE, CheckpointStore, CpuManagerCheckpoint, StateFile};
use corral_cpumgr::{
    CfsQuota, ContainerMap, ContainerRuntime, ContainerState, ContainerStatus, CpuManager,
    CpuManagerConfig, CpuManagerError, CpuQuotaPolicy, PodSource, PodStatus, RuntimeError, restore,
};
use corral_testkit::conformance_topology::{load_testdata, vector_file};
use corral_topology::{AffinityStore, CpuSet, CpuTopology, HintProvider, Pod, TopologyHint};
use serde_json::Value;

use crate::support::harness::FlakyFile;
use crate::support::*;

/// upstream topoSingleSocketHT.
fn topology() -> CpuTopology {
    crate::support::topologies::single_socket_ht()
        .topology()
        .clone()
}

fn static_config() -> CpuManagerConfig {
    CpuManagerConfig {
        policy: "static".into(),
        reserved_cpu_millis: Some(1000),
        ..CpuManagerConfig::default()
    }
}

#[derive(Default, Debug)]
struct Pods {
    pods: Mutex<Vec<Pod>>,
    statuses: Mutex<BTreeMap<String, PodStatus>>,
}

impl PodSource for Pods {
    fn active_pods(&self) -> Vec<Pod> {
        self.pods.lock().unwrap().clone()
    }
    fn pod_status(&self, uid: &str) -> Option<PodStatus> {
        self.statuses.lock().unwrap().get(uid).cloned()
    }
}

#[derive(Default, Debug)]
struct Runtime {
    updates: Mutex<Vec<(String, String)>>,
    quotas: Mutex<Vec<CfsQuota>>,
    fail: Mutex<bool>,
}

#[corral_cpumgr::async_trait]
impl ContainerRuntime for Runtime {
    async fn update_container_cpuset(
        &self,
        id: &str,
        cpus: &CpuSet,
        quota: CfsQuota,
    ) -> Result<(), RuntimeError> {
        if *self.fail.lock().unwrap() {
            return Err(RuntimeError::new("boom"));
        }
        self.updates
            .lock()
            .unwrap()
            .push((id.into(), cpus.to_string()));
        self.quotas.lock().unwrap().push(quota);
        Ok(())
    }
}

fn start(
    config: &CpuManagerConfig,
    backend: StateFile,
    initial: ContainerMap,
) -> Result<(CpuManager, Arc<Pods>, Arc<Runtime>), CpuManagerError> {
    start_with_quota(config, backend, initial, CpuQuotaPolicy::default())
}

fn start_with_quota(
    config: &CpuManagerConfig,
    backend: StateFile,
    initial: ContainerMap,
    quota: CpuQuotaPolicy,
) -> Result<(CpuManager, Arc<Pods>, Arc<Runtime>), CpuManagerError> {
    let manager = CpuManager::new(config, &topology())?.with_cpu_quota_policy(quota);
    let pods = Arc::new(Pods::default());
    let runtime = Arc::new(Runtime::default());
    manager.start(backend, pods.clone(), runtime.clone(), initial)?;
    Ok((manager, pods, runtime))
}

/// [`start`] with [`static_config`], an empty memory backend and no containers.
fn start_static() -> (CpuManager, Arc<Pods>, Arc<Runtime>) {
    start(
        &static_config(),
        StateFile::in_memory(),
        ContainerMap::new(),
    )
    .unwrap()
}

/// A manager started with [`static_config`] on the checkpoint files of `store`.
fn start_static_on(store: &CheckpointStore, initial: ContainerMap) -> CpuManager {
    let backend = StateFile::in_store(store, CPU_MANAGER_FILE).unwrap();
    start(&static_config(), backend, initial).unwrap().0
}

/// v1.36's gates with `CPUManagerPolicyAlphaOptions` on.
fn alpha_gates() -> corral_topology::FeatureGates {
    corral_topology::FeatureGates::default()
        .with(corral_topology::Feature::CpuManagerPolicyAlphaOptions, true)
        .unwrap()
}

/// Allocate `pod`'s first container without a NUMA preference.
fn allocate_first(manager: &CpuManager, pod: &Pod) {
    manager
        .allocate(pod, &pod.containers[0], TopologyHint::default())
        .unwrap();
}

/// The conformance file of `cpu_manager_state` checkpoints.
fn checkpoint_vectors() -> Value {
    load_testdata("testdata/conformance/checkpoint_cpumanager.json")
}

fn vector(name: &str) -> Vec<u8> {
    vector_file("testdata/conformance/checkpoint_cpumanager.json", name).into_bytes()
}

/// Every conformance checkpoint file restores as upstream's `restoreState` decides: files it
/// rejects are refused with the file named, files it accepts give a state (or a cpuset
/// parse error for garbage sets), v1 files are migrated through the container map.
#[test]
fn conformance_checkpoints_restore_as_upstream() {
    let doc = checkpoint_vectors();
    let all = doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .chain(doc["negatives"].as_array().unwrap());
    for v in all {
        let file = v["file"].as_str().unwrap().as_bytes().to_vec();
        let verdict = v["verdicts"]["restore_state_accepts_as"]
            .as_str()
            .unwrap_or("error");
        let policy = serde_json::from_slice::<Value>(&file)
            .ok()
            .and_then(|j| j["policyName"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let backend = StateFile::in_memory_holding(file);
        let got = restore(&backend, &policy, &|id| Some(("pod".into(), id.into())));
        match verdict {
            "error" => {
                let e = got.expect_err(v["name"].as_str().unwrap());
                assert!(e.to_string().contains("<memory>"), "{e}");
            }
            _ => {
                if let Err(e) = got {
                    assert!(
                        e.to_string().contains("could not parse"),
                        "{}: {e}",
                        v["name"]
                    );
                }
            }
        }
    }
}

/// A kubelet-written `cpu_manager_state` (v2, static, default 0-7) restores and validates,
/// and corral writes back exactly what a kubelet reads.
#[test]
fn kubelet_written_state_restores_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    store
        .write_bytes(
            CPU_MANAGER_FILE,
            &vector("cpumanager_v2/static_default_only"),
        )
        .unwrap();
    let manager = start_static_on(&store, ContainerMap::new());
    assert_eq!(manager.state().default_cpu_set().to_string(), "0-7");
    assert_eq!(manager.allocatable_cpus().to_string(), "1-7");
    let pod = make_pod("uid", "c", 2000, 2000);
    allocate_first(&manager, &pod);
    let back: CpuManagerCheckpoint = store.get(CPU_MANAGER_FILE).unwrap();
    assert_eq!(back.default_cpu_set, "0,2-4,6-7");
    assert_eq!(back.entries.unwrap()["uid"].as_ref().unwrap()["c"], "1,5");

    // A v1 (legacy) kubelet file is migrated through the runtime's containers.
    let store = CheckpointStore::open(dir.path().join("v1")).unwrap();
    store
        .write_bytes(
            CPU_MANAGER_FILE,
            &vector("cpumanager_v1_legacy/static_two_containers"),
        )
        .unwrap();
    let mut initial = ContainerMap::new();
    initial.add("pod", "c1", "containerID1");
    initial.add("pod", "c2", "containerID2");
    let manager = start_static_on(&store, initial);
    assert_eq!(manager.exclusive_cpus("pod", "c1").to_string(), "2-3");
    assert_eq!(manager.exclusive_cpus("pod", "c2").to_string(), "4-5");
}

/// Upstream refuses every policy change; corral migrates none → static when nothing is
/// exclusively assigned, and refuses the rest naming the file and the remedy.
#[test]
fn policy_change_none_to_static_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    store
        .write_bytes(CPU_MANAGER_FILE, &vector("cpumanager_v2/none_policy_empty"))
        .unwrap();
    let manager = start_static_on(&store, ContainerMap::new());
    assert_eq!(manager.state().default_cpu_set().to_string(), "0-7");
    let back: CpuManagerCheckpoint = store.get(CPU_MANAGER_FILE).unwrap();
    assert_eq!(back.policy_name, "static");

    // static → none is refused, naming the file and what to do.
    let err = start(
        &CpuManagerConfig::default(),
        StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap(),
        ContainerMap::new(),
    )
    .unwrap_err()
    .to_string();
    let file = dir.path().join(CPU_MANAGER_FILE).display().to_string();
    assert!(
        err.contains("configured policy \"none\" differs from state checkpoint policy \"static\""),
        "{err}"
    );
    assert!(err.contains(&file), "{err}");
    assert!(err.contains("delete"), "{err}");
}

/// Validation failures (upstream `validateState`) refuse to start and name the file.
#[test]
fn invalid_state_refuses_to_start_with_remedy() {
    let mut state = corral_cpumgr::CpuState::default();
    state.set_default_cpu_set("0-3".parse().unwrap()); // CPUs 4-7 vanished
    let backend = StateFile::in_memory();
    let b = backend.clone();
    b.stage_checkpoint(&state.to_checkpoint("static")).unwrap();
    let err = error_chain(&start(&static_config(), b, ContainerMap::new()).unwrap_err());
    assert!(err.contains("doesn't match with CPUs in state"), "{err}");
    assert!(err.contains("the node's CPUs changed"), "{err}");
    assert!(err.contains("<memory>"), "{err}");

    // Two pods holding the same CPU: corral's extra check.
    let mut state = corral_cpumgr::CpuState::default();
    state.set_default_cpu_set("0,3-7".parse().unwrap());
    state.set_cpu_set("a", "c", "1-2".parse().unwrap());
    state.set_cpu_set("b", "c", "2".parse().unwrap());
    let b = StateFile::in_memory();
    b.stage_checkpoint(&state.to_checkpoint("static")).unwrap();
    let err = error_chain(&start(&static_config(), b, ContainerMap::new()).unwrap_err());
    assert!(
        err.contains("CPU 2 is assigned exclusively to both"),
        "{err}"
    );
}

/// Why [`CpuManager::new`] refuses `config` on [`topology`].
fn new_error(config: &CpuManagerConfig) -> String {
    error_chain(&CpuManager::new(config, &topology()).unwrap_err())
}

/// Zero reservation and unknown policies/options are refused as upstream does.
#[test]
fn configuration_errors() {
    let zero = CpuManagerConfig {
        reserved_cpu_millis: Some(0),
        ..static_config()
    };
    let err = new_error(&zero);
    assert!(
        err.contains("requires systemreserved.cpu + kubereserved.cpu to be greater than zero"),
        "{err}"
    );
    let unknown = CpuManagerConfig {
        policy: "dynamic".into(),
        ..CpuManagerConfig::default()
    };
    assert!(new_error(&unknown).contains("unknown policy: \"dynamic\""));
    let bad_option = CpuManagerConfig {
        policy_options: BTreeMap::from([("bogus".into(), "true".into())]),
        ..static_config()
    };
    assert!(new_error(&bad_option).contains("\"bogus\""));
    // 1.5 CPUs reserved round up to 2: CPUs 0 and 4 (one core).
    let half = CpuManagerConfig {
        reserved_cpu_millis: Some(1500),
        ..static_config()
    };
    let (m, _, _) = start(&half, StateFile::in_memory(), ContainerMap::new()).unwrap();
    assert_eq!(m.allocatable_cpus().to_string(), "1-3,5-7");
}

/// `CpuManagerConfig::validate` (what a configuration check runs before any machine is at hand)
/// refuses exactly what `CpuManager::new` refuses on a machine that fits, with the same error.
#[test]
fn validate_refuses_what_new_refuses_without_the_machine() {
    use corral_topology::PolicyName;
    let options = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let explicit = |list: &str| list.parse::<CpuSet>().unwrap();
    let cases: Vec<(CpuManagerConfig, Option<&str>)> = vec![
        (CpuManagerConfig::default(), None),
        (static_config(), None),
        (
            CpuManagerConfig {
                policy_options: options(&[("full-pcpus-only", "true")]),
                ..static_config()
            },
            None,
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[("bogus", "true")]),
                ..static_config()
            },
            Some("unknown CPU Manager Policy option: \"bogus\""),
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[("full-pcpus-only", "yes")]),
                ..static_config()
            },
            Some("parsing \"yes\": invalid syntax"),
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[
                    ("full-pcpus-only", "true"),
                    ("distribute-cpus-across-cores", "true"),
                ]),
                feature_gates: alpha_gates(),
                ..static_config()
            },
            Some("can not be used at the same time"),
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[("distribute-cpus-across-cores", "true")]),
                ..static_config()
            },
            Some(
                "CPU Manager Policy Alpha-level Options not enabled, but option \"distribute-cpus-across-cores\" provided",
            ),
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[("full-pcpus-only", "true")]),
                ..CpuManagerConfig::default()
            },
            Some("None policy: received unsupported options=map[full-pcpus-only:true]"),
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[("align-by-socket", "true")]),
                topology_manager_policy: PolicyName::SingleNumaNode,
                feature_gates: alpha_gates(),
                ..static_config()
            },
            Some("incompatible with CPUManager align-by-socket"),
        ),
        (
            CpuManagerConfig {
                policy_options: options(&[("align-by-socket", "true")]),
                topology_manager_policy: PolicyName::Restricted,
                feature_gates: alpha_gates(),
                ..static_config()
            },
            None,
        ),
        (
            CpuManagerConfig {
                reserved_cpu_millis: None,
                ..static_config()
            },
            Some("unable to determine reserved CPU resources"),
        ),
        (
            CpuManagerConfig {
                reserved_cpu_millis: Some(0),
                ..static_config()
            },
            Some("to be greater than zero"),
        ),
        (
            CpuManagerConfig {
                reserved_cpu_millis: None,
                reserved_system_cpus: explicit("0,4"),
                ..static_config()
            },
            None,
        ),
        (
            CpuManagerConfig {
                reserved_cpu_millis: Some(1000),
                reserved_system_cpus: explicit("0,4"),
                ..static_config()
            },
            Some("size of 0,4 did not equal 1"),
        ),
        (
            CpuManagerConfig {
                policy: "dynamic".into(),
                ..CpuManagerConfig::default()
            },
            Some("unknown policy: \"dynamic\""),
        ),
    ];
    for (config, refused) in cases {
        let checked = config.validate();
        let built = CpuManager::new(&config, &topology());
        match refused {
            None => {
                assert!(checked.is_ok(), "{config:?}: {:?}", checked.err());
                assert!(built.is_ok(), "{config:?}: {:?}", built.err());
            }
            Some(message) => {
                let checked = error_chain(&checked.expect_err("validate accepted it"));
                let built = error_chain(&built.expect_err("new accepted it"));
                assert_eq!(checked, built, "{config:?}");
                assert!(checked.contains(message), "{config:?}: {checked}");
            }
        }
    }
    // The machine's own reasons are new's alone: 9 reserved CPUs on an 8-CPU machine.
    let too_many = CpuManagerConfig {
        reserved_cpu_millis: Some(9000),
        ..static_config()
    };
    assert!(too_many.validate().is_ok());
    assert!(CpuManager::new(&too_many, &topology()).is_err());
}

fn running(name: &str, id: &str) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        container_id: format!("containerd://{id}"),
        state: ContainerState::Running,
    }
}

/// With `DisableCPUQuotaWithExclusiveCPUs` off, exclusive CPUs keep their quota.
#[test]
fn the_quota_is_kept_when_the_gate_is_off() {
    let (manager, _, _) = start_with_quota(
        &static_config(),
        StateFile::in_memory(),
        ContainerMap::new(),
        CpuQuotaPolicy::Enforce,
    )
    .unwrap();
    let pod = make_pod("uid", "c", 2000, 2000);
    allocate_first(&manager, &pod);
    assert!(!manager.exclusive_cpus("uid", "c").is_empty());
    assert_eq!(manager.cfs_quota("uid", "c"), CfsQuota::Unchanged);
}

/// Upstream `TestReconcileState` shapes: running containers get their cpuset once, waiting
/// ones are skipped, failed updates are reported and retried.
#[tokio::test]
async fn reconcile_pushes_only_changes() {
    let (manager, pods, runtime) = start_static();
    let pod = make_pod("uid", "c", 2000, 2000);
    let shared = make_pod("uid2", "s", 500, 1000);
    allocate_first(&manager, &pod);
    *pods.pods.lock().unwrap() = vec![pod.clone(), shared.clone()];
    pods.statuses.lock().unwrap().insert(
        "uid".into(),
        PodStatus {
            container_statuses: vec![running("c", "cid")],
            ..PodStatus::default()
        },
    );
    pods.statuses.lock().unwrap().insert(
        "uid2".into(),
        PodStatus {
            container_statuses: vec![ContainerStatus {
                state: ContainerState::Waiting,
                ..running("s", "sid")
            }],
            ..PodStatus::default()
        },
    );
    let report = manager.reconcile_once().await;
    assert_eq!(report.success.len(), 1);
    assert_eq!(report.failure.len(), 1);
    assert_eq!(
        runtime.updates.lock().unwrap().as_slice(),
        &[("cid".into(), "1,5".into())]
    );
    // Exclusive CPUs: no CFS quota (DisableCPUQuotaWithExclusiveCPUs, on in v1.36).
    assert_eq!(
        runtime.quotas.lock().unwrap().as_slice(),
        &[CfsQuota::Unlimited]
    );
    assert_eq!(manager.cfs_quota("uid", "c"), CfsQuota::Unlimited);
    assert_eq!(manager.cfs_quota("uid2", "s"), CfsQuota::Unchanged);
    // Nothing changed: nothing pushed again.
    manager.reconcile_once().await;
    assert_eq!(runtime.updates.lock().unwrap().len(), 1);
    // The shared container starts; a failed update is reported, then retried.
    pods.statuses
        .lock()
        .unwrap()
        .get_mut("uid2")
        .unwrap()
        .container_statuses[0]
        .state = ContainerState::Running;
    *runtime.fail.lock().unwrap() = true;
    let report = manager.reconcile_once().await;
    assert_eq!(report.failure[0].container_id, "sid");
    *runtime.fail.lock().unwrap() = false;
    manager.reconcile_once().await;
    assert_eq!(
        runtime.updates.lock().unwrap().last().unwrap(),
        &("sid".into(), "0,2-4,6-7".into())
    );
    assert_eq!(
        runtime.quotas.lock().unwrap().last(),
        Some(&CfsQuota::Unchanged)
    );
    // No status at all: the pod is reported.
    pods.statuses.lock().unwrap().remove("uid");
    let report = manager.reconcile_once().await;
    assert!(
        report
            .failure
            .iter()
            .any(|f| f.pod_name == "uid" && f.container_name.is_empty())
    );
}

/// Deviation from upstream #112228: an init container's CPUs that no later container reuses
/// return to the shared pool once it terminated (upstream keeps them pinned for the pod's
/// life).
#[tokio::test]
async fn terminated_init_container_cpus_return_to_the_pool() {
    let (manager, pods, _) = start_static();
    let pod = make_multi_container_pod("uid", &[(4000, 4000)], &[(2000, 2000)]);
    let store = AffinityStore::new();
    for (_, c) in pod.all_containers() {
        HintProvider::allocate(&manager, &pod, c, &store).unwrap();
    }
    assert_eq!(
        manager.exclusive_cpus("uid", "initContainer-0").to_string(),
        "1-2,5-6"
    );
    assert_eq!(
        manager.exclusive_cpus("uid", "appContainer-0").to_string(),
        "1,5"
    );
    assert_eq!(manager.state().default_cpu_set().to_string(), "0,3-4,7");
    *pods.pods.lock().unwrap() = vec![pod.clone()];
    pods.statuses.lock().unwrap().insert(
        "uid".into(),
        PodStatus {
            init_container_statuses: vec![ContainerStatus {
                state: ContainerState::Terminated,
                ..running("initContainer-0", "init")
            }],
            container_statuses: vec![running("appContainer-0", "app")],
        },
    );
    let report = manager.reconcile_once().await;
    assert_eq!(report.released_init_containers.len(), 1);
    assert_eq!(manager.state().default_cpu_set().to_string(), "0,2-4,6-7");
    assert_eq!(
        manager.exclusive_cpus("uid", "initContainer-0").to_string(),
        "1,5"
    );
    // Re-admission after a restart: the released init container has no preference instead
    // of an unsatisfiable one, and allocation stays idempotent.
    assert!(
        manager
            .hints_for_container(&pod, &pod.init_containers[0])
            .is_none()
    );
    for (_, c) in pod.all_containers() {
        HintProvider::allocate(&manager, &pod, c, &store).unwrap();
    }
    assert_eq!(manager.state().default_cpu_set().to_string(), "0,2-4,6-7");
}

/// Upstream `removeStaleState`, with the pod pending admission kept (newer upstream passes
/// it as the root pod).
#[test]
fn stale_state_removal_keeps_the_pending_pod() {
    let (manager, _, _) = start_static();
    let a = make_pod("a", "c", 2000, 2000);
    let b = make_pod("b", "c", 2000, 2000);
    allocate_first(&manager, &a);
    allocate_first(&manager, &b);
    manager.add_container("a", "c", "cid-a");
    manager.remove_stale_state(&[], Some(&b)).unwrap();
    assert!(manager.exclusive_cpus("a", "c").is_empty());
    assert_eq!(manager.exclusive_cpus("b", "c").len(), 2);
    // remove_container releases; unknown ids are ignored.
    manager.add_container("b", "c", "cid-b");
    manager.remove_container("cid-b").unwrap();
    manager.remove_container("nope").unwrap();
    assert_eq!(manager.state().default_cpu_set().to_string(), "0-7");
    assert_eq!(manager.cpu_affinity("b", "c").to_string(), "0-7");
}

/// The none policy: no hints, nothing allocatable, everything in the shared pool.
#[test]
fn none_policy_manager() {
    let (manager, _, _) = start(
        &CpuManagerConfig::default(),
        StateFile::in_memory(),
        ContainerMap::new(),
    )
    .unwrap();
    let pod = make_pod("uid", "c", 2000, 2000);
    assert!(
        manager
            .hints_for_container(&pod, &pod.containers[0])
            .is_none()
    );
    allocate_first(&manager, &pod);
    assert!(manager.exclusive_cpus("uid", "c").is_empty());
    assert!(manager.allocatable_cpus().is_empty());
    assert_eq!(manager.all_cpus().to_string(), "0-7");
}

/// A pod source with a generation, counting how often the manager asks for the pods.
#[derive(Default, Debug)]
struct CountedPods {
    pods: Mutex<Vec<Pod>>,
    generation: std::sync::atomic::AtomicU64,
    asked: std::sync::atomic::AtomicUsize,
}

impl PodSource for CountedPods {
    fn active_pods(&self) -> Vec<Pod> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.pods.lock().unwrap().clone()
    }
    fn pod_status(&self, _: &str) -> Option<PodStatus> {
        None
    }
    fn generation(&self) -> Option<u64> {
        Some(self.generation.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// Admitting a pod sweeps stale state once per (pod source generation, pending pod), not
/// once per container: a 300-container pod costs one walk over the node's pods, not 300
/// (the quadratic admission of issue 12). The sweep still runs when either changes.
#[test]
fn stale_state_is_swept_once_per_pod_source_generation_and_pending_pod() {
    use std::sync::atomic::Ordering::SeqCst;
    let manager = CpuManager::new(&static_config(), &topology()).unwrap();
    let pods = Arc::new(CountedPods::default());
    manager
        .start(
            StateFile::in_memory(),
            pods.clone(),
            Arc::new(Runtime::default()),
            ContainerMap::new(),
        )
        .unwrap();
    let apps: Vec<(i64, i64)> = (0..300).map(|_| (100, 200)).collect();
    let big = make_multi_container_pod("big", &[], &apps);
    let store = AffinityStore::default();
    for c in &big.containers {
        manager.hints_for_container(&big, c);
        HintProvider::allocate(&manager, &big, c, &store).unwrap();
    }
    assert_eq!(pods.asked.load(SeqCst), 1);
    // Another pending pod: swept again; so is a changed pod source.
    let a = make_pod("a", "c", 2000, 2000);
    allocate_first(&manager, &a);
    assert_eq!(pods.asked.load(SeqCst), 2);
    assert_eq!(manager.exclusive_cpus("a", "c").len(), 2);
    // `a` never became active: once the source changes, a sweep takes its CPUs back.
    pods.generation.fetch_add(1, SeqCst);
    let b = make_pod("b", "c", 1000, 1000);
    allocate_first(&manager, &b);
    assert_eq!(pods.asked.load(SeqCst), 3);
    assert!(manager.exclusive_cpus("a", "c").is_empty());
}

/// Fails when the `Display` of `err` or of any of its causes prints its own source's text:
/// the agent prints the whole chain, so a cause would show twice.
fn assert_no_repeated_source(err: &dyn std::error::Error) {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(source) = e.source() {
            assert!(
                !e.to_string().contains(&source.to_string()),
                "{e:?} prints its source: {}",
                error_chain(err)
            );
        }
        current = e.source();
    }
}

/// Issue #14: no error prints its source (policy creation, invalid state, a damaged file, a
/// failed write rolled back).
#[test]
fn errors_print_their_source_once() {
    let bad_option = CpuManagerConfig {
        policy_options: BTreeMap::from([("bogus".into(), "true".into())]),
        ..static_config()
    };
    assert_no_repeated_source(&CpuManager::new(&bad_option, &topology()).unwrap_err());

    let mut state = corral_cpumgr::CpuState::default();
    state.set_default_cpu_set("0-3".parse().unwrap()); // CPUs 4-7 vanished
    let b = StateFile::in_memory();
    b.stage_checkpoint(&state.to_checkpoint("static")).unwrap();
    assert_no_repeated_source(&start(&static_config(), b, ContainerMap::new()).unwrap_err());

    let damaged = StateFile::in_memory_holding(b"{\"policyName\": ".to_vec());
    let err = start(&static_config(), damaged, ContainerMap::new()).unwrap_err();
    assert!(error_chain(&err).contains("<memory>"), "{err}");
    assert_no_repeated_source(&err);

    let backend = FlakyFile::default();
    let (manager, _, _) =
        start(&static_config(), backend.file.clone(), ContainerMap::new()).unwrap();
    backend.fail(true);
    let pod = make_pod("uid", "c", 2000, 2000);
    let err = manager
        .allocate(&pod, &pod.containers[0], TopologyHint::default())
        .unwrap_err();
    assert!(error_chain(&err).contains("rename into place"), "{err}");
    assert_no_repeated_source(&err);
}

/// Issue #29: with `distribute-cpus-across-numa` on 64 NUMA nodes, a container asking 81
/// CPUs over all of them made upstream's combination walk run for minutes under the
/// decision lock. The allocation has a step budget of its own, also inside a decision that
/// has none left: a small request is still answered exactly, the large one validly and the
/// decision marked approximate.
#[test]
fn a_distributed_allocation_has_a_bounded_budget_of_its_own() {
    use corral_topology::topologymanager::{bounded, spend};
    use corral_topology::{CpuInfo, CpuRecord, NumaMask};

    let machine = corral_testkit::large_machines::synthetic64();
    let records: Vec<CpuRecord> = machine
        .cpus
        .iter()
        .map(|c| CpuRecord {
            cpu: c.cpu,
            info: CpuInfo {
                core: c.core,
                socket: c.socket,
                numa: c.numa,
                uncore: c.uncore,
            },
        })
        .collect();
    let config = CpuManagerConfig {
        policy_options: BTreeMap::from([("distribute-cpus-across-numa".into(), "true".into())]),
        ..static_config()
    };
    let manager = CpuManager::new(&config, &CpuTopology::new(&records).unwrap()).unwrap();
    let pods = Arc::new(Pods::default());
    let runtime = Arc::new(Runtime::default());
    let backend = StateFile::in_memory();
    manager
        .start(backend, pods, runtime, ContainerMap::new())
        .unwrap();
    let every_node = TopologyHint::new(Some(NumaMask::new(0..64).unwrap()), false);
    for (uid, cpus, exact) in [("small", 8, true), ("big", 81, false)] {
        let pod = make_pod(uid, "c", cpus * 1000, cpus * 1000);
        let (result, effort) = bounded(1, || {
            assert!(spend(1));
            manager.allocate(&pod, &pod.containers[0], every_node)
        });
        result.unwrap();
        assert_eq!(effort.exact, exact, "{uid}");
        let got = manager.exclusive_cpus(uid, "c");
        assert_eq!(got.len(), cpus as usize, "{uid}: {got}");
        assert!(!got.contains(0), "{uid}: the reserved CPU in {got}");
    }
}

/// An init container's CPUs are noted for reuse by the containers after it; releasing the
/// pod gives its CPUs back but not that note. `restore_policy` puts the policy back as it
/// was, so the pod allocated again gets what a fresh manager gives it, and leaves the
/// assignments made since alone (a reconcile sweep, another pod).
#[test]
fn restoring_the_policy_keeps_the_assignments_made_since() {
    let with_init = |uid: &str| Pod {
        init_containers: vec![container("init", 4000, 4000)],
        ..make_pod(uid, "app", 2000, 2000)
    };
    // What the app container gets on a fresh manager, and after an init container's
    // allocation was undone without putting the policy back.
    let fresh = {
        let (manager, _, _) = start_static();
        let pod = make_pod("x", "app", 2000, 2000);
        allocate_first(&manager, &pod);
        manager.exclusive_cpus("x", "app")
    };
    let (manager, _, _) = start_static();
    let other = make_pod("other", "c", 2000, 2000);
    let before = manager.policy_snapshot();
    let pod = with_init("x");
    manager
        .allocate(&pod, &pod.init_containers[0], TopologyHint::default())
        .unwrap();
    manager.remove_stale_state(&[], None).unwrap();
    allocate_first(&manager, &other);
    manager.restore_policy(before);
    // The assignment made after the snapshot stands.
    assert_eq!(manager.exclusive_cpus("other", "c").len(), 2);
    manager.remove_stale_state(&[], None).unwrap();
    let pod = make_pod("x", "app", 2000, 2000);
    allocate_first(&manager, &pod);
    assert_eq!(manager.exclusive_cpus("x", "app"), fresh);
}

/// A pod given back whole and admitted again with the same uid is decided as on a fresh
/// manager: the CPUs its init container left to reuse go with it (upstream keeps them
/// until another pod is allocated; a kubelet never admits a uid twice).
#[test]
fn a_pod_given_back_and_admitted_again_is_decided_as_on_a_fresh_manager() {
    let pod = make_multi_container_pod("uid", &[(4000, 4000)], &[(2000, 2000)]);
    let store = AffinityStore::new();
    let admit = |manager: &CpuManager| {
        for (_, c) in pod.all_containers() {
            HintProvider::allocate(manager, &pod, c, &store).unwrap();
        }
    };
    let (again, _, _) = start_static();
    admit(&again);
    let reuse = |m: &CpuManager| {
        let policy = m.policy_snapshot();
        format!("{policy:?}")
    };
    assert!(reuse(&again).contains("\"uid\""), "{}", reuse(&again));
    again.remove_pod_containers(&pod).unwrap();
    assert!(!reuse(&again).contains("\"uid\""), "{}", reuse(&again));
    admit(&again);
    let (fresh, _, _) = start_static();
    admit(&fresh);
    assert_eq!(again.state(), fresh.state());
    assert_eq!(reuse(&again), reuse(&fresh));
}

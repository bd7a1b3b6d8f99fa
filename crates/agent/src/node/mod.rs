//! The composition: the topology manager with the CPU manager as its hint provider, the DRA
//! manager over the plugin registry, and the admitted pods — built from an [`AgentConfig`],
//! restored from the checkpoints under the layout's state dir.
//!
//! Admission (`admission.rs`) runs the kubelet's sequence (topology manager scope → hints →
//! merge → allocate CPUs, then devices; then DRA prepare), decisions one at a time under the
//! decision lock, with the synchronous managers' work on the blocking pool. Unlike upstream
//! it is all-or-nothing: a rejection or failure part-way releases everything the pod was
//! given (CPU assignments, affinities, devices, claims), so every checkpoint ends
//! byte-identical to before.

mod admission;
mod container_events;
mod containers;
mod decision;
mod device_capacity;
mod device_health;
mod device_metrics;

mod dra_devices;
mod dry_run;
mod explain;
mod journal;
mod kubelet_devices;
mod locks;
pub(crate) mod numa_resources;
mod pod_files;
mod pod_record;
mod pods;
mod resize;
pub(crate) mod resource_metrics;
pub(crate) use resize::INFEASIBLE;
#[cfg(test)]
pub(crate) use settled::pause;
mod resource_status;
mod restore_check;
mod settled;
mod state_changes;
mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use corral_checkpoint::{
    CPU_MANAGER_FILE, CheckpointStore, DEVICE_MANAGER_FILE, DRA_MANAGER_FILE, Journal,
    MEMORY_MANAGER_FILE, StateFile,
};
use corral_cpumgr::{
    CfsQuota, ContainerMap, ContainerRuntime, CpuManager, CpuQuotaPolicy, RuntimeError,
};
use corral_devicemgr::{DeviceManager, DeviceManagerConfig, StartOptions};
use corral_dra::{DraManagerConfig, PluginRegistry, PodClaims, RegistryConfig, ResourceClaim};
use corral_memmgr::MemoryManager;
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::{TopologyHint, TopologyManager};
use corral_topology::{CpuSet, CpuTopology, Feature, NumaIds, NumaMask, Pod};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use crate::config::{AgentConfig, PodLimits};
use crate::manifest::{ClaimManifest, PodConversionError, pod_from_manifest};
use device_health::DeviceHealth;
use device_metrics::DevicePluginMetrics;
use locks::{DecisionLock, PodLocks};

pub(crate) use container_events::StartedContainer;
pub(crate) use device_capacity::CAPACITY_PERIOD;
pub(crate) use explain::{Explanation, HintView};
pub(crate) use kubelet_devices::{DeviceNumaNodes, KubeletDevices};
pub(crate) use pod_record::{Affinity, HeldMemory, Holding, PodRecord};
pub(crate) use pods::{AdmittedPod, PodBook};
pub(crate) use state_changes::StateChanges;
pub(crate) use view::PodView;

/// The DRA manager as the agent runs it: drivers found through the plugin registry.
pub(crate) type DraManager = corral_dra::DraManager<Arc<PluginRegistry>>;

/// What an admission answered.
#[derive(Debug, Clone)]
pub(crate) enum Admission {
    /// Admitted (or already admitted): what each container holds.
    Admitted(PodView),
    /// Rejected, with upstream's reason string and message; nothing was kept.
    Rejected {
        /// e.g. `TopologyAffinityError`, `SMTAlignmentError`, `UnexpectedAdmissionError`.
        reason: String,
        /// The message.
        message: String,
        /// Why, when the topology manager merged hints for it.
        explanation: Option<Box<Explanation>>,
    },
}

/// Why an admission request was not answered with an admission or a rejection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdmitError {
    /// The pod is invalid or asks for more than the limits allow (nothing was changed).
    #[error(transparent)]
    InvalidPod(#[from] PodConversionError),
    /// A ResourceClaim manifest is invalid (nothing was changed).
    #[error("invalid ResourceClaim")]
    InvalidClaim(#[source] anyhow::Error),
    /// The node failed; whatever the admission took was given back.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// A container runtime for when no CRI endpoint is configured: every push fails.
#[derive(Debug)]
pub(crate) struct NoRuntime;

#[corral_cpumgr::async_trait]
impl ContainerRuntime for NoRuntime {
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        _: &CpuSet,
        _: CfsQuota,
    ) -> Result<(), RuntimeError> {
        Err(RuntimeError::new(format!(
            "no containerRuntimeEndpoint configured: cannot update container {container_id}"
        )))
    }
}

/// `dra_operations_duration_seconds` (upstream's name, no `kubelet_` prefix): DRA
/// prepare/unprepare latency by `operation_name` and `is_error`, in upstream's
/// `DRADurationBuckets` (`ExponentialBucketsRange(.1, 40, 15)`).
///
/// A documented deviation: upstream labels the observation
/// `is_error=strconv.FormatBool(err == nil)`, i.e. `"true"` for a success; corral writes
/// `"true"` for a failure, as the label's name and help text say.
pub(crate) type DraDurations = crate::exposition::HistogramVec;

fn dra_durations() -> DraDurations {
    crate::exposition::HistogramVec::new(
        &["operation_name", "is_error"],
        &crate::exposition::exponential_buckets_range(0.1, 40.0, 15),
    )
}

/// Every manager of one node, composed.
pub(crate) struct Node {
    dra_durations: DraDurations,
    device_metrics: DevicePluginMetrics,
    topology: TopologyManager,
    cpu: Arc<CpuManager>,
    memory: Arc<MemoryManager>,
    devices: Arc<DeviceManager>,
    dra: DraManager,
    registry: Arc<PluginRegistry>,
    /// DRA device health, with `ResourceHealthStatus`.
    health: Option<DeviceHealth>,
    /// Makes every state file durable: one fsync per commit (see `journal.rs`).
    journal: Arc<Journal>,
    pods: Arc<PodBook>,
    /// NUMA node ids ↔ mask bits (identity unless a node id is above 63).
    numa_ids: NumaIds,
    state_dir: std::path::PathBuf,
    limits: PodLimits,
    /// `PodLevelResources` is on: pods may set `spec.resources` (else they are refused).
    pod_level_resources: bool,
    /// One decision at a time (hints, merge, CPU, memory and device choice); no plugin or
    /// driver is called under it.
    decisions: Arc<DecisionLock>,
    /// One admission or release of a pod at a time.
    pod_locks: PodLocks,
    /// Admitted decisions whose device plugins are still answering `Allocate`.
    realizing: decision::Realizing,
    /// In NRI mode, the devices the kubelet gave each container (a hint provider).
    kubelet_devices: Option<Arc<KubeletDevices>>,
    /// The DRA devices of the pod under decision that ResourceSlices place on NUMA nodes
    /// (a hint provider; see `dra_devices`).
    dra_devices: Arc<KubeletDevices>,
    /// KEP-5526's `resource_manager_*` counters.
    resource_metrics: resource_metrics::ResourceManagerMetrics,
    /// Whether pods with pod-level resources are managed at pod level.
    pod_level_managed: bool,
    /// Bumped after every committed change and every device list or health change.
    changes: StateChanges,
    /// The NUMA nodes' memory and huge pages as sysfs gave them (empty when not read).
    numa_memory: BTreeMap<usize, NumaMemory>,
    /// Fault injection: the next container joining its pod fails to be recorded.
    #[cfg(test)]
    fail_next_join: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("topology", &self.topology)
            .field("cpu", &self.cpu)
            .finish_non_exhaustive()
    }
}

/// Turn a persisted record back into the managers' pod, read as `limits` reads pods.
fn pod_of_record(record: &PodRecord, limits: &PodLimits) -> Result<Pod> {
    let manifest: K8sPod = serde_json::from_value(record.pod.clone())?;
    // Admitted before: validated then, whatever the limits are now.
    let limits = PodLimits {
        max_containers: usize::MAX,
        max_manifest_bytes: usize::MAX,
        ..*limits
    };
    Ok(pod_from_manifest(&manifest, &limits)?)
}

/// A claim manifest as the DRA manager takes it.
fn dra_claim(claim: &K8sResourceClaim) -> Result<ResourceClaim> {
    let claim = ClaimManifest::from_k8s(claim).map_err(|e| anyhow!(e))?;
    Ok(ResourceClaim {
        namespace: claim.namespace,
        name: claim.name,
        uid: claim.uid,
        allocation: Some(
            claim
                .devices
                .into_iter()
                .map(|d| corral_dra::AllocatedDevice {
                    request: d.request,
                    driver: d.driver,
                    pool: d.pool,
                    device: d.device,
                })
                .collect(),
        ),
        reserved_for: claim
            .reserved_for
            .into_iter()
            .map(|c| corral_dra::ConsumerRef {
                resource: c.resource,
                name: c.name,
                uid: c.uid,
            })
            .collect(),
    })
}

/// The pod's claims resolved (corral takes claims by name; template claims need an API
/// server and are refused by the DRA manager). The error is boxed: the DRA manager's error
/// type is large and this result travels through the admission path.
fn pod_claims(pod: &Pod) -> Result<PodClaims, Box<corral_dra::DraManagerError>> {
    PodClaims::from_pod(pod, &BTreeMap::new()).map_err(Box::new)
}

impl Node {
    /// Build every manager from `config` over `topology` and the NUMA nodes' `memory`
    /// (every NUMA node, memory-only ones included; only the static memory policy reads
    /// it), restoring their checkpoints under the layout's state dir and the admitted pods
    /// from `<root>/corral/pods/`.
    pub(crate) fn open(
        config: &AgentConfig,
        topology: &CpuTopology,
        memory: &BTreeMap<usize, NumaMemory>,
        runtime: Arc<dyn ContainerRuntime>,
    ) -> Result<Node> {
        let layout = &config.layout;
        layout.create_dirs()?;
        let state_dir = layout.state_dir();
        let journal = journal::open(layout)?;
        let pods_store = CheckpointStore::open(layout.pods_dir())
            .with_context(|| format!("opening {}", layout.pods_dir().display()))?
            .with_journal(Arc::clone(&journal));
        let pods = Arc::new(PodBook::load(pods_store, |record| {
            pod_of_record(record, &config.pod_limits)
        })?);
        let gates = &config.feature_gates;
        let pod_level = gates.pod_level_resources();
        let mut manager =
            TopologyManager::new(&config.topology, &topology.numa_nodes_for_manager())
                .context("building the topology manager")?
                .with_pod_level_resources(pod_level);
        let quota = if gates.enabled(Feature::DisableCpuQuotaWithExclusiveCpus) {
            CpuQuotaPolicy::UnlimitedForExclusiveCpus
        } else {
            CpuQuotaPolicy::Enforce
        };
        let cpu = Arc::new(
            CpuManager::new(&config.cpu_manager, topology)
                .context("building the CPU manager")?
                .with_pod_level_resources(pod_level)
                .with_cpu_quota_policy(quota),
        );
        let mut containers = ContainerMap::new();
        for admitted in pods.all() {
            for (name, id) in &admitted.record.container_ids {
                containers.add(&admitted.pod.uid, name, id);
            }
        }
        let store = CheckpointStore::open(state_dir)
            .with_context(|| format!("opening the state dir {}", state_dir.display()))?
            .with_journal(Arc::clone(&journal));
        cpu.start(
            StateFile::in_store(&store, CPU_MANAGER_FILE).context("the CPU manager state file")?,
            Arc::clone(&pods) as _,
            runtime,
            containers.clone(),
        )
        .context("starting the CPU manager")?;
        let numa_memory = memory.clone();
        let mut memory_config = config
            .memory_manager
            .manager_config(memory)
            .context("computing the node allocatable reservation of memory")?;
        memory_config.pod_level_resources = pod_level;
        let memory = Arc::new(
            MemoryManager::new(&memory_config, memory).context("building the memory manager")?,
        );
        memory
            .start(
                StateFile::in_store(&store, MEMORY_MANAGER_FILE)
                    .context("the memory manager state file")?,
            )
            .context("starting the memory manager")?;
        let mut device_config =
            DeviceManagerConfig::for_topology(layout.device_plugins_dir(), topology);
        device_config.endpoint_stop_grace = config.device_plugin_grace_period;
        device_config.registration_wait = config.plugin_wait_timeout;
        device_config.max_resources_per_plugin = config.max_resources_per_device_plugin;
        device_config.registration_server.max_connections = config.max_connections_per_socket;
        let device_store = CheckpointStore::open(layout.device_plugins_dir())
            .context("opening the device-plugin directory")?
            .with_journal(Arc::clone(&journal));
        let devices = Arc::new(DeviceManager::with_state_file(
            device_config,
            StateFile::in_store(&device_store, DEVICE_MANAGER_FILE)
                .context("the device manager state file")?,
        ));
        let device_metrics = DevicePluginMetrics::default();
        let changes = StateChanges::default();
        devices.set_observer(Arc::new(state_changes::DeviceObserver {
            metrics: device_metrics.clone(),
            changes: changes.clone(),
        }));
        // Providers allocate in this order: CPUs, then devices (as the kubelet).
        let decisions = Arc::new(DecisionLock::new());
        manager.add_hint_provider(Arc::clone(&cpu) as _);
        // The device manager reserves in the decision; `Node::decide` has the plugins
        // answer after it.
        manager.add_hint_provider(Arc::clone(&devices) as _);
        // In NRI mode the kubelet allocates devices; CPUs align with what it gave.
        let kubelet_devices = (config.nri != crate::config::NriMode::Off).then(|| {
            Arc::new(KubeletDevices::new(
                "kubelet devices",
                topology.numa_ids().clone(),
            ))
        });
        if let Some(provider) = &kubelet_devices {
            manager.add_hint_provider(Arc::clone(provider) as _);
        }
        // DRA devices their ResourceSlices place on a NUMA node (the kubelet has none).
        let dra_devices = Arc::new(KubeletDevices::new("dra", topology.numa_ids().clone()));
        manager.add_hint_provider(Arc::clone(&dra_devices) as _);
        // Memory last, as the kubelet registers it after the CPU and device managers.
        manager.add_hint_provider(Arc::clone(&memory) as _);
        for admitted in pods.all() {
            for (name, affinity) in &admitted.record.affinities {
                let numa = match &affinity.numa {
                    Some(ids) => Some(
                        topology
                            .numa_ids()
                            .mask_of(ids.iter().copied())
                            .with_context(|| format!("pod {}: NUMA affinity", admitted.pod.uid))?,
                    ),
                    None => None,
                };
                let hint = TopologyHint {
                    numa_affinity: numa,
                    preferred: affinity.preferred,
                };
                manager.store().set_affinity(&admitted.pod.uid, name, hint);
            }
        }
        for (id, pod_uid, name) in containers.iter() {
            manager.store().add_container(pod_uid, name, id);
        }
        let registry = PluginRegistry::new(RegistryConfig::new(layout.plugins_registry_dir()));
        let dra = DraManager::new(
            StateFile::in_store(&store, DRA_MANAGER_FILE).context("the DRA manager state file")?,
            Arc::clone(&registry),
            DraManagerConfig::default(),
        )
        .context("restoring the DRA manager")?;
        let health = if gates.enabled(Feature::ResourceHealthStatus) {
            Some(DeviceHealth::watch(
                state_dir,
                &registry,
                gates.enabled(Feature::ResourceHealthStatusMessage),
            )?)
        } else {
            None
        };
        Ok(Node {
            dra_durations: dra_durations(),
            device_metrics,
            topology: manager,
            cpu,
            memory,
            devices,
            dra,
            registry,
            health,
            journal,
            pods,
            numa_ids: topology.numa_ids().clone(),
            state_dir: state_dir.to_path_buf(),
            limits: config.pod_limits,
            pod_level_resources: gates.enabled(Feature::PodLevelResources),
            decisions,
            pod_locks: PodLocks::default(),
            realizing: decision::Realizing::default(),
            kubelet_devices,
            dra_devices,
            resource_metrics: resource_metrics::ResourceManagerMetrics::default(),
            pod_level_managed: pod_level == corral_topology::PodLevelResources::Managed,
            changes,
            numa_memory,
            #[cfg(test)]
            fail_next_join: Default::default(),
        })
    }

    /// Start the device manager: restore `kubelet_internal_checkpoint` and serve the
    /// device-plugin registration socket, check every restored state against the admitted
    /// pods, and start the state journal. Must run before any admission.
    pub(crate) async fn start_devices(&self) -> Result<()> {
        let pods = Arc::clone(&self.pods);
        let mut running = BTreeSet::new();
        for admitted in pods.all() {
            for name in admitted.record.container_ids.keys() {
                running.insert((admitted.pod.uid.clone(), name.clone()));
            }
        }
        let specs = Arc::clone(&self.pods);
        self.devices
            .set_pod_specs(Arc::new(move |uid: &str| specs.get(uid).map(|a| a.pod)));
        let options = StartOptions {
            active_pods: Some(Arc::new(move || pods.active_uids())),
            sources_ready: true,
            running_containers: running,
        };
        self.devices
            .start(options)
            .await
            .context("starting the device manager")?;
        restore_check::check(self)?;
        // Write `kubelet_internal_checkpoint` now (removing a pod nobody has writes the
        // current state), so a later rejected admission that touched devices finds the file
        // as it left it rather than creating it.
        self.devices
            .remove_pod("")
            .context("writing the device manager checkpoint")?;
        // Every restored state was accepted: journal from it on (a refused start leaves the
        // old journal, and the files an operator repairs, alone).
        self.journal
            .activate()
            .context("starting the state journal")
    }

    /// Stop serving device plugins.
    pub(crate) async fn stop_devices(&self) {
        self.devices.stop().await;
    }

    /// The change counter a watcher of the node's state subscribes to.
    pub(crate) fn changes(&self) -> &StateChanges {
        &self.changes
    }

    /// The NUMA nodes' memory and huge pages as sysfs gave them at start (empty when they
    /// were not read).
    pub(crate) fn numa_memory(&self) -> &BTreeMap<usize, NumaMemory> {
        &self.numa_memory
    }

    /// In NRI mode, where the kubelet's device allocations are recorded for alignment.
    pub(crate) fn kubelet_devices(&self) -> Option<&Arc<KubeletDevices>> {
        self.kubelet_devices.as_ref()
    }

    /// The device manager.
    pub(crate) fn devices(&self) -> &Arc<DeviceManager> {
        &self.devices
    }

    /// The machine's NUMA node ids of a mask's bits (the managers' masks use dense bits when
    /// a node id is above 63; everything corral reports uses the real ids).
    pub(crate) fn os_numa_ids(&self, mask: NumaMask) -> Vec<usize> {
        mask.iter()
            .map(|bit| self.numa_ids.os_id(bit).unwrap_or(bit))
            .collect()
    }

    /// The CPU manager.
    pub(crate) fn cpu(&self) -> &Arc<CpuManager> {
        &self.cpu
    }

    /// The memory manager.
    pub(crate) fn memory(&self) -> &Arc<MemoryManager> {
        &self.memory
    }

    /// How long the decision under way has held the decision lock (`None`: no decision
    /// under way). Decisions are bounded by their search budget, so a long hold means a
    /// wedged manager (`/healthz` says so).
    pub(crate) fn decision_held_for(&self) -> Option<std::time::Duration> {
        self.decisions.held_for()
    }

    /// The topology manager.
    pub(crate) fn topology(&self) -> &TopologyManager {
        &self.topology
    }

    /// The DRA plugin registry (the agent watches its directory).
    pub(crate) fn registry(&self) -> &Arc<PluginRegistry> {
        &self.registry
    }

    /// The admitted pods.
    pub(crate) fn pods(&self) -> &Arc<PodBook> {
        &self.pods
    }

    /// `device_plugin_registration_total`, `device_plugin_alloc_duration_seconds`.
    pub(crate) fn resource_metrics(&self) -> &resource_metrics::ResourceManagerMetrics {
        &self.resource_metrics
    }

    pub(crate) fn device_metrics(&self) -> &DevicePluginMetrics {
        &self.device_metrics
    }

    /// `dra_operations_duration_seconds`.
    pub(crate) fn dra_durations(&self) -> &DraDurations {
        &self.dra_durations
    }

    /// `dra_resource_claims_in_use`: prepared claims per driver, and all of them under
    /// `<any>` (always present), as upstream's `claimInfoCache.claimsInUse`.
    pub(crate) fn dra_claims_in_use(&self) -> BTreeMap<String, u64> {
        let mut in_use = BTreeMap::from([("<any>".to_owned(), 0)]);
        for claim in self.dra.claim_infos() {
            if !claim.is_prepared() {
                continue;
            }
            *in_use.entry("<any>".to_owned()).or_default() += 1;
            for driver in claim.drivers() {
                *in_use.entry(driver.to_owned()).or_default() += 1;
            }
        }
        in_use
    }

    /// What every container of `pod_uid` holds.
    pub(crate) fn view(&self, pod_uid: &str) -> Result<PodView> {
        let admitted = self
            .pods
            .get(pod_uid)
            .ok_or_else(|| anyhow!("pod {pod_uid} was not admitted"))?;
        Ok(view::pod_view(self, &admitted))
    }

    /// What every admitted pod holds.
    pub(crate) fn views(&self) -> Vec<PodView> {
        self.pods
            .all()
            .iter()
            .map(|admitted| view::pod_view(self, admitted))
            .collect()
    }
}

/// `namespace/name` of a pod, the kubelet's `pod` log field (klog's `KObj`), when known (a
/// release of a uid corral never admitted has no name: the field is left out).
fn pod_ref(pod: &Pod) -> Option<String> {
    (!pod.name.is_empty()).then(|| format!("{}/{}", pod.namespace, pod.name))
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
pub(crate) mod tests_concurrent;
#[cfg(test)]
mod tests_containers;
#[cfg(test)]
mod tests_device_decisions;
#[cfg(test)]
mod tests_device_events;
#[cfg(test)]
mod tests_device_hostile;
#[cfg(test)]
mod tests_dra_extended;
#[cfg(test)]
mod tests_dra_health;
#[cfg(test)]
mod tests_dra_numa;
#[cfg(test)]
mod tests_dry_run;
#[cfg(test)]
mod tests_dry_run_races;
#[cfg(test)]
mod tests_explain;
#[cfg(test)]
mod tests_explain_hostile;
#[cfg(test)]
pub(crate) mod tests_gated_plugin;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_pod_level;
#[cfg(test)]
mod tests_pod_records;
#[cfg(test)]
mod tests_readmit;
#[cfg(test)]
mod tests_resize;
#[cfg(test)]
mod tests_restore;

//! The composition: the topology manager with the CPU manager as its hint provider, the DRA
//! manager over the plugin registry, and the admitted pods — built from an [`AgentConfig`],
//! restored from the checkpoints under the layout's state dir.
//!
//! Admission runs the kubelet's sequence (topology manager scope → hints → merge → allocate
//! CPUs; then DRA prepare), one pod at a time under one async mutex, with the synchronous
//! managers' work on the blocking pool. Unlike upstream it is all-or-nothing: a rejection or
//! failure part-way releases everything the pod was given (CPU assignments, affinities,
//! claims), so every checkpoint ends byte-identical to before.

mod device_metrics;
mod device_provider;
mod locks;
mod pods;
mod restore_check;
mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use corral_checkpoint::CheckpointStore;
use corral_cpumgr::{CheckpointBackend, ContainerMap, ContainerRuntime, CpuManager, RuntimeError};
use corral_devicemgr::{DeviceManager, DeviceManagerConfig, StartOptions};
use corral_dra::{PluginRegistry, PodClaims, RegistryConfig, ResourceClaim};
use corral_topology::topologymanager::{TopologyHint, TopologyManager, UNEXPECTED_ADMISSION_ERROR};
use corral_topology::{CpuSet, CpuTopology, NumaIds, NumaMask, Pod};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use crate::config::{AgentConfig, PodLimits};
use crate::manifest::{ClaimManifest, PodConversionError, pod_from_manifest};
use device_metrics::DevicePluginMetrics;
use device_provider::DeviceProvider;
use locks::{DecisionLock, PodLocks};

pub(crate) use pods::{AdmittedPod, Affinity, Holding, PodBook, PodRecord};
pub(crate) use view::PodView;

/// The DRA manager as the agent runs it: drivers found through the plugin registry.
pub(crate) type DraManager = corral_dra::Manager<Arc<PluginRegistry>>;

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

impl ContainerRuntime for NoRuntime {
    fn update_container_cpuset(&self, container_id: &str, _: &CpuSet) -> Result<(), RuntimeError> {
        Err(RuntimeError(format!(
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
    devices: Arc<DeviceManager>,
    dra: DraManager,
    registry: Arc<PluginRegistry>,
    pods: Arc<PodBook>,
    /// NUMA node ids ↔ mask bits (identity unless a node id is above 63).
    numa_ids: NumaIds,
    state_dir: std::path::PathBuf,
    limits: PodLimits,
    /// One decision at a time (hints, merge, CPU and device choice); handed back while
    /// device plugins answer.
    decisions: Arc<DecisionLock>,
    /// One admission or release of a pod at a time.
    pod_locks: PodLocks,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("topology", &self.topology)
            .field("cpu", &self.cpu)
            .finish_non_exhaustive()
    }
}

/// Turn a persisted record back into the managers' pod.
fn pod_of_record(record: &PodRecord) -> Result<Pod> {
    let manifest: K8sPod = serde_json::from_value(record.pod.clone())?;
    // Admitted before: validated then, whatever the limits are now.
    let limits = PodLimits {
        max_containers: usize::MAX,
        ..PodLimits::DEFAULT
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
/// server and are refused by the DRA manager).
fn pod_claims(pod: &Pod) -> Result<PodClaims, corral_dra::DraError> {
    PodClaims::from_pod(pod, &BTreeMap::new())
}

impl Node {
    /// Build every manager from `config` over `topology`, restoring their checkpoints under
    /// the layout's state dir and the admitted pods from `<root>/corral/pods/`.
    pub(crate) fn open(
        config: &AgentConfig,
        topology: &CpuTopology,
        runtime: Arc<dyn ContainerRuntime>,
    ) -> Result<Node> {
        let layout = &config.layout;
        let state_dir = layout.state_dir();
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating the state dir {}", state_dir.display()))?;
        let pods = Arc::new(PodBook::load(layout.pods_dir(), pod_of_record)?);
        let mut manager =
            TopologyManager::new(&config.topology, &topology.numa_nodes_for_manager())
                .context("building the topology manager")?;
        let cpu = Arc::new(
            CpuManager::new(&config.cpu_manager, topology).context("building the CPU manager")?,
        );
        let mut containers = ContainerMap::new();
        for admitted in pods.all() {
            for (name, id) in &admitted.record.container_ids {
                containers.add(&admitted.pod.uid, name, id);
            }
        }
        let store = CheckpointStore::open(state_dir)
            .with_context(|| format!("opening the state dir {}", state_dir.display()))?;
        cpu.start(
            Box::new(CheckpointBackend::new(store)),
            Arc::clone(&pods) as _,
            runtime,
            containers.clone(),
        )
        .context("starting the CPU manager")?;
        let mut device_config =
            DeviceManagerConfig::for_topology(layout.device_plugins_dir(), topology);
        device_config.endpoint_stop_grace = config.device_plugin_grace_period;
        device_config.registration_wait = config.plugin_wait_timeout;
        device_config.max_resources_per_plugin = config.max_resources_per_device_plugin;
        device_config.registration_server.max_connections = config.max_connections_per_socket;
        let devices =
            Arc::new(DeviceManager::new(device_config).context("building the device manager")?);
        let device_metrics = DevicePluginMetrics::default();
        devices.set_observer(Arc::new(device_metrics.clone()));
        // Providers allocate in this order: CPUs, then devices (as the kubelet).
        let decisions = Arc::new(DecisionLock::new());
        manager.add_hint_provider(Arc::clone(&cpu) as _);
        manager.add_hint_provider(Arc::new(DeviceProvider::new(
            Arc::clone(&devices),
            Arc::clone(&decisions),
        )));
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
        let dra = DraManager::open(state_dir, Arc::clone(&registry))
            .context("restoring the DRA manager")?;
        Ok(Node {
            dra_durations: dra_durations(),
            device_metrics,
            topology: manager,
            cpu,
            devices,
            dra,
            registry,
            pods,
            numa_ids: topology.numa_ids().clone(),
            state_dir: state_dir.to_path_buf(),
            limits: config.pod_limits,
            decisions,
            pod_locks: PodLocks::default(),
        })
    }

    /// Start the device manager: restore `kubelet_internal_checkpoint` and serve the
    /// device-plugin registration socket. Must run before any admission.
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
            .context("writing the device manager checkpoint")
    }

    /// Stop serving device plugins.
    pub(crate) async fn stop_devices(&self) {
        self.devices.stop().await;
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

    /// Admit a pod: the kubelet's admission sequence, all-or-nothing. A pod already
    /// admitted (same uid) answers what it holds; a second admission of a pod whose
    /// admission is under way waits for it. Admissions of different pods run their
    /// decisions one at a time, but not while a device plugin or a DRA driver answers.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        mut manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
    ) -> Result<Admission, AdmitError> {
        let pod = pod_from_manifest(&manifest, &self.limits)?;
        manifest.metadata.uid = Some(pod.uid.clone());
        let dra_claims = claims
            .iter()
            .map(dra_claim)
            .collect::<Result<Vec<_>>>()
            .map_err(AdmitError::InvalidClaim)?;
        let _pod_lock = self.pod_locks.lock(&pod.uid).await;
        if self.pods.get(&pod.uid).is_some() {
            return Ok(Admission::Admitted(self.view(&pod.uid)?));
        }
        self.pods.begin_admitting(&pod);
        let node = Arc::clone(self);
        let admitting = pod.clone();
        let result = tokio::task::spawn_blocking(move || {
            let _decision = node.decisions.acquire_blocking();
            node.topology.admit(&admitting)
        })
        .await;
        let result = match result {
            Ok(result) => result,
            Err(err) => {
                self.release_managers(&pod, false).await;
                return Err(anyhow!("the topology manager's admission panicked: {err}").into());
            }
        };
        if !result.admit {
            tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, reason = %result.reason, detail = %result.message, "pod rejected");
            self.release_managers(&pod, false).await;
            return Ok(Admission::Rejected {
                reason: result.reason,
                message: result.message,
            });
        }
        if !pod.resource_claims.is_empty() {
            let started = std::time::Instant::now();
            let prepared = match pod_claims(&pod) {
                Ok(claims) => self.dra.prepare_resources(&claims, &dra_claims).await,
                Err(err) => Err(err),
            };
            self.observe_dra("PrepareResources", started, prepared.is_err());
            if let Err(err) = prepared {
                tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, err = %err, "preparing claims failed; pod rejected");
                self.release_managers(&pod, true).await;
                return Ok(Admission::Rejected {
                    reason: UNEXPECTED_ADMISSION_ERROR.to_owned(),
                    message: format!("Allocate failed due to {err}, which is unexpected"),
                });
            }
        }
        let record = match self.record_of(&pod, &manifest, &claims) {
            Ok(record) => record,
            Err(err) => {
                self.release_managers(&pod, true).await;
                return Err(err.into());
            }
        };
        let uid = pod.uid.clone();
        let admitted = AdmittedPod {
            record,
            pod: pod.clone(),
        };
        if let Err(err) = self.pods.update(&uid, |entry| *entry = Some(admitted)) {
            self.release_managers(&pod, true).await;
            return Err(err
                .context("persisting the admitted pod; the admission was undone")
                .into());
        }
        tracing::info!(pod = pod_ref(&pod), podUID = %uid, "pod admitted");
        Ok(Admission::Admitted(self.view(&uid)?))
    }

    /// What the pod's file records: its manifests, its containers' affinities and what the
    /// managers gave each container.
    fn record_of(
        &self,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
    ) -> Result<PodRecord> {
        let mut affinities = BTreeMap::new();
        let mut holdings = BTreeMap::new();
        for (kind, c) in pod.all_containers() {
            let hint = self.topology.affinity(&pod.uid, &c.name);
            let numa = hint.numa_affinity.map(|mask| self.os_numa_ids(mask));
            affinities.insert(
                c.name.clone(),
                Affinity {
                    numa,
                    preferred: hint.preferred,
                },
            );
            let holding = restore_check::holding_of(self, pod, kind, c);
            if holding != Holding::default() {
                holdings.insert(c.name.clone(), holding);
            }
        }
        Ok(PodRecord {
            pod: serde_json::to_value(manifest)?,
            claims: claims
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<_, _>>()?,
            container_ids: BTreeMap::new(),
            affinities,
            holdings: Some(holdings),
            removed_containers: Default::default(),
        })
    }

    /// Release whatever the managers hold for `pod` (no longer admitted nor being
    /// admitted): CPU assignments of pods neither admitted nor being admitted, the pod's
    /// affinities, its devices, and (with `claims`) its prepared claims. The managers'
    /// part runs under the decision lock; DRA drivers are called outside it.
    async fn release_managers(self: &Arc<Self>, pod: &Pod, claims: bool) {
        self.pods.end_admitting(&pod.uid);
        let pod_uid = pod.uid.as_str();
        let node = Arc::clone(self);
        let uid = pod_uid.to_owned();
        // Only a pod that holds devices is removed from the device manager, so its
        // checkpoint is not rewritten for pods that never touched it.
        let holds_devices = pod
            .all_containers()
            .any(|(_, c)| !self.devices.container_devices(pod_uid, &c.name).is_empty());
        let cpu = tokio::task::spawn_blocking(move || {
            let _decision = node.decisions.acquire_blocking();
            let active = corral_cpumgr::PodSource::active_pods(node.pods.as_ref());
            let released = node.cpu.remove_stale_state(&active, None);
            node.topology.store().remove_pod(&uid);
            if holds_devices && let Err(err) = node.devices.remove_pod(&uid) {
                tracing::error!(podUID = %uid, err = %err, "releasing devices failed");
            }
            released
        })
        .await;
        match cpu {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::error!(pod = pod_ref(pod), podUID = pod_uid, err = %err, "releasing CPUs failed")
            }
            Err(err) => {
                tracing::error!(pod = pod_ref(pod), podUID = pod_uid, err = %err, "releasing CPUs panicked")
            }
        }
        if claims
            && (!pod.resource_claims.is_empty()
                || self.dra.pod_might_need_to_unprepare_resources(pod_uid))
        {
            let started = std::time::Instant::now();
            let unprepared = self.dra.unprepare_resources(pod_uid).await;
            self.observe_dra("UnprepareResources", started, unprepared.is_err());
            if let Err(err) = unprepared {
                tracing::error!(pod = pod_ref(pod), podUID = pod_uid, err = %err, "unpreparing claims failed");
            }
        }
    }

    fn observe_dra(&self, operation: &str, started: std::time::Instant, error: bool) {
        self.dra_durations.observe(
            &[operation, if error { "true" } else { "false" }],
            started.elapsed().as_secs_f64(),
        );
    }

    /// `device_plugin_registration_total`, `device_plugin_alloc_duration_seconds`.
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

    /// Release everything `pod_uid` holds; `false` when the pod was not admitted.
    pub(crate) async fn release(self: &Arc<Self>, pod_uid: &str) -> Result<bool> {
        let _pod_lock = self.pod_locks.lock(pod_uid).await;
        let removed = self.pods.update(pod_uid, Option::take)?;
        let known = removed.is_some();
        let pod = removed.map(|p| p.pod).unwrap_or_else(|| Pod {
            uid: pod_uid.to_owned(),
            ..Pod::default()
        });
        self.release_managers(&pod, true).await;
        if known {
            tracing::info!(pod = pod_ref(&pod), podUID = pod_uid, "pod released");
        }
        Ok(known)
    }

    /// Release every admitted pod not in `active`; returns their uids.
    pub(crate) async fn sync_active(self: &Arc<Self>, active: &[String]) -> Result<Vec<String>> {
        let stale: Vec<String> = self
            .pods
            .uids()
            .into_iter()
            .filter(|uid| !active.contains(uid))
            .collect();
        for uid in &stale {
            self.release(uid).await?;
        }
        Ok(stale)
    }

    /// A container of an admitted pod started with `container_id`.
    pub(crate) fn container_started(
        &self,
        pod_uid: &str,
        name: &str,
        container_id: &str,
    ) -> Result<()> {
        let known = self.pods.update(pod_uid, |entry| {
            let Some(admitted) = entry else {
                return Err(anyhow!("pod {pod_uid} was not admitted"));
            };
            if admitted.pod.container(name).is_none() {
                return Err(anyhow!("pod {pod_uid} has no container {name:?}"));
            }
            admitted
                .record
                .container_ids
                .insert(name.to_owned(), container_id.to_owned());
            Ok(())
        })?;
        known?;
        self.cpu.add_container(pod_uid, name, container_id);
        self.topology
            .store()
            .add_container(pod_uid, name, container_id);
        Ok(())
    }

    /// The container `container_id` was removed: its exclusive CPUs go back to the pool.
    pub(crate) fn container_removed(&self, container_id: &str) -> Result<()> {
        self.cpu.remove_container(container_id)?;
        self.topology.remove_container(container_id);
        if let Some(uid) = self.pods.pod_of_container(container_id) {
            self.pods.update(&uid, |entry| {
                if let Some(admitted) = entry {
                    let names: Vec<String> = admitted
                        .record
                        .container_ids
                        .iter()
                        .filter(|(_, id)| *id == container_id)
                        .map(|(name, _)| name.clone())
                        .collect();
                    admitted
                        .record
                        .container_ids
                        .retain(|_, id| id != container_id);
                    admitted.record.removed_containers.extend(names);
                }
            })?;
        }
        Ok(())
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
mod tests_hostile;

//! The DRA manager ([`DraManager`], upstream `ManagerImpl`): prepares a pod's resource claims
//! through their drivers, answers which CDI devices a container gets, and unprepares claims
//! when their last pod is gone — with the claim cache checkpointed in `dra_manager_state`.
//!
//! Crash consistency: a claim (with the pod's reference) is checkpointed *before* its
//! drivers are asked to prepare it, and its devices are checkpointed only after every
//! driver succeeded; on unprepare it leaves the checkpoint only after its drivers
//! succeeded. A restart at any point therefore finds every claim a driver may have
//! prepared, and either prepares it again (drivers must be idempotent) or unprepares it.
//!
//! Locking: the cache sits behind a short synchronous lock that is never held across a
//! driver call. Prepare and unprepare operations are serialized among themselves (one
//! async operation lock), so a claim shared by two pods is never prepared and unprepared at
//! once; [`DraManager::get_resources`] and the queries never wait for a driver.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use crate::claim::{ClaimRef, PodClaims, ResourceClaim, claim_key};
use crate::claim_cache::ClaimInfoCache;
use crate::claim_info::{ClaimInfo, PreparedDevice};
use crate::driver::DriverClients;
use crate::error::DraManagerError;
use corral_checkpoint::{CheckpointStore, DRA_MANAGER_FILE, StateFile};

use crate::state;

mod checks;
mod containers;
mod crash;

use crate::crash_point::CrashPoint;
use checks::{check_answer, check_skipped, claim_failed, list, resolve_claims};
pub use containers::ContainerInfo;
use crash::Faults;

const PREPARE: &str = "NodePrepareResources";
const UNPREPARE: &str = "NodeUnprepareResources";

/// [`DraManager`] settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraManagerConfig {
    /// Add CDI annotations (`cdi.k8s.io/<driver>_<claim uid>`) to [`ContainerInfo`] for
    /// runtimes without CRI `CDIDevices` support (upstream did up to v1.30).
    pub cdi_annotations: bool,
    /// Stop dead at this point of an operation, as a killed process would (fault
    /// injection for crash-consistency tests; feature `test-util`).
    #[cfg(feature = "test-util")]
    #[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
    pub crash_at: Option<CrashPoint>,
}

struct Inner {
    cache: ClaimInfoCache,
    state_file: StateFile,
    faults: Faults,
    /// The last staging of the cache failed (a plain store's write): the cache holds
    /// changes the file does not, so the next operation stages it again before anything
    /// else — before a driver call, before answering — rather than taking what is only in
    /// memory for recorded.
    unstaged: bool,
}

impl Inner {
    /// Stage the cache's checkpoint; [`DraManager::make_durable`] makes it durable.
    fn sync_to_checkpoint(&mut self) -> Result<(), DraManagerError> {
        let staged = state::stage(&self.state_file, &self.cache.to_checkpoint());
        self.unstaged = staged.is_err();
        staged
    }

    fn alive(&self) -> Result<(), DraManagerError> {
        self.faults.alive()
    }
}

/// The DRA manager.
pub struct DraManager<D> {
    drivers: D,
    config: DraManagerConfig,
    inner: Mutex<Inner>,
    operations: tokio::sync::Mutex<()>,
}

impl<D> std::fmt::Debug for DraManager<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraManager")
            .field("config", &self.config)
            .field("claims", &self.lock().cache.len())
            .finish_non_exhaustive()
    }
}

impl<D> DraManager<D> {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One claim a prepare or unprepare call works on.
struct Planned {
    claim: ClaimRef,
    drivers: Vec<String>,
}

/// What one prepare or unprepare operation sends: the claims, in one batch per driver.
#[derive(Default)]
struct Plan {
    batches: BTreeMap<String, Vec<ClaimRef>>,
    claims: Vec<Planned>,
}

impl Plan {
    /// Send `info` to each of its drivers.
    fn add(&mut self, info: &ClaimInfo) {
        let drivers: Vec<String> = info.drivers().map(str::to_owned).collect();
        for driver in &drivers {
            self.batches
                .entry(driver.clone())
                .or_default()
                .push(info.claim_ref());
        }
        self.claims.push(Planned {
            claim: info.claim_ref(),
            drivers,
        });
    }
}

impl<D: DriverClients> DraManager<D> {
    /// A manager over `dra_manager_state` in `state_dir`.
    pub fn open(
        state_dir: impl AsRef<std::path::Path>,
        drivers: D,
    ) -> Result<Self, DraManagerError> {
        let dir = state_dir.as_ref();
        let file = CheckpointStore::open(dir)
            .and_then(|store| StateFile::in_store(&store, DRA_MANAGER_FILE))
            .map_err(|source| DraManagerError::Checkpoint {
                path: dir.join(DRA_MANAGER_FILE),
                source,
            })?;
        Self::new(file, drivers, DraManagerConfig::default())
    }

    /// A manager restoring its cache from `state_file` (every claim unprepared). Each change
    /// is staged in the file and made durable ([`StateFile::commit`]) before a driver is
    /// called and before the operation answers.
    pub fn new(
        state_file: StateFile,
        drivers: D,
        config: DraManagerConfig,
    ) -> Result<Self, DraManagerError> {
        let checkpoint = state::load_or_create(&state_file)?;
        let cache = ClaimInfoCache::from_checkpoint(&checkpoint);
        tracing::info!(claims = cache.len(), "DRA manager restored its claim cache");
        let faults = Faults::new(&config);
        Ok(DraManager {
            drivers,
            config,
            inner: Mutex::new(Inner {
                cache,
                state_file,
                faults,
                unstaged: false,
            }),
            operations: tokio::sync::Mutex::new(()),
        })
    }

    /// Make what this operation staged durable, outside the cache lock (nothing to do
    /// unless the file is journaled and something is pending).
    async fn make_durable(&self) -> Result<(), DraManagerError> {
        let file = self.lock().state_file.clone();
        state::make_durable(&file).await
    }

    /// The drivers this manager calls.
    pub fn drivers(&self) -> &D {
        &self.drivers
    }

    /// Prepare the pod's claims (upstream `PrepareResources`).
    ///
    /// Every claim the pod names must be among `claims`, allocated, and reserved for the
    /// pod. Claims already prepared only gain the pod's reference; the others are recorded
    /// and checkpointed, sent to their drivers in one batch per driver, and marked prepared
    /// with their devices (replacing earlier ones) when every driver succeeded. On error the
    /// pod's references stay recorded: call [`unprepare_resources`](Self::unprepare_resources)
    /// to release what this pod was given.
    pub async fn prepare_resources(
        &self,
        pod: &PodClaims,
        claims: &[ResourceClaim],
    ) -> Result<(), DraManagerError> {
        let _operation = self.operations.lock().await;
        let pod_name = pod.display_name();
        let wanted = resolve_claims(pod, claims)?;

        // Record: validate everything first, then add entries and references, checkpoint.
        let Plan {
            batches,
            claims: planned,
        } = {
            let mut inner = self.lock();
            inner.alive()?;
            let mut to_prepare = Vec::new();
            for claim in &wanted {
                match inner.cache.get(&claim.name, &claim.namespace) {
                    Some(info) if info.uid() != claim.uid => {
                        return Err(DraManagerError::ClaimUidMismatch {
                            claim: claim.key(),
                            cached_uid: info.uid().to_owned(),
                            supplied_uid: claim.uid.clone(),
                        });
                    }
                    Some(info) if info.is_prepared() => {}
                    Some(info) => to_prepare.push(info.clone()),
                    None => to_prepare.push(ClaimInfo::from_claim(claim)?),
                }
            }
            let mut plan = Plan::default();
            for info in &to_prepare {
                if let Some(driver) = info.drivers().find(|d| !self.drivers.is_registered(d)) {
                    return Err(DraManagerError::DriverNotRegistered {
                        driver: driver.to_owned(),
                        pod: pod_name.clone(),
                        claim: claim_key(info.namespace(), info.name()),
                    });
                }
                plan.add(info);
            }
            let mut changed = false;
            for claim in &wanted {
                if !inner.cache.contains(&claim.name, &claim.namespace) {
                    inner.cache.add(ClaimInfo::from_claim(claim)?);
                    changed = true;
                    tracing::debug!(pod = %pod_name, claim = %claim.claim_ref().key(), "created claim info cache entry");
                }
                let info = inner
                    .cache
                    .get_mut(&claim.name, &claim.namespace)
                    .expect("present: found or just added");
                if !info.has_pod_reference(&pod.uid) {
                    info.add_pod_reference(&pod.uid);
                    changed = true;
                }
            }
            if changed || inner.unstaged {
                inner.sync_to_checkpoint()?;
            }
            inner.faults.crash_if(CrashPoint::AfterRecord)?;
            plan
        };
        // The record is durable before any driver prepares: a crash during the calls leaves
        // a record to unprepare from.
        self.make_durable().await?;
        if planned.is_empty() {
            tracing::debug!(pod = %pod_name, "all resource claims already prepared");
            return Ok(());
        }

        // Prepare: one call per driver, outside the cache lock.
        let mut devices: BTreeMap<(String, String), Vec<PreparedDevice>> = BTreeMap::new();
        let mut first_error = None;
        for (driver, batch) in &batches {
            tracing::info!(pod = %pod_name, driver = %driver, claims = %list(batch), "NodePrepareResources");
            match self.call_prepare(&pod_name, driver, batch).await {
                Ok(results) => {
                    for (uid, prepared) in results {
                        devices.insert((uid, driver.clone()), prepared);
                    }
                }
                Err(err) => {
                    tracing::warn!(pod = %pod_name, driver = %driver, error = %err, "preparing resource claims failed");
                    first_error = Some(err);
                    break;
                }
            }
        }

        // Record the outcome: devices of every driver that answered, and the prepared flag
        // for claims all of whose drivers succeeded.
        let first_error = {
            let mut inner = self.lock();
            inner.alive()?;
            inner.faults.crash_if(CrashPoint::AfterPrepare)?;
            for plan in &planned {
                let Some(info) = inner.cache.get_mut(&plan.claim.name, &plan.claim.namespace)
                else {
                    continue;
                };
                if info.uid() != plan.claim.uid {
                    continue;
                }
                let mut complete = true;
                for driver in &plan.drivers {
                    match devices.get(&(plan.claim.uid.clone(), driver.clone())) {
                        Some(prepared) => info.set_devices(driver, prepared),
                        None => complete = false,
                    }
                }
                if complete {
                    info.set_prepared();
                    tracing::info!(pod = %pod_name, claim = %plan.claim.key(), "resource claim prepared");
                }
            }
            inner.sync_to_checkpoint()?;
            first_error
        };
        self.make_durable().await?;
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// One NodePrepareResources call, its answer checked against the batch.
    async fn call_prepare(
        &self,
        pod: &str,
        driver: &str,
        batch: &[ClaimRef],
    ) -> Result<BTreeMap<String, Vec<PreparedDevice>>, DraManagerError> {
        let results = self.drivers.node_prepare_resources(driver, batch).await;
        let results = check_answer(PREPARE, driver, pod, batch, results)?;
        let mut out = BTreeMap::new();
        for claim in batch {
            match results.get(&claim.uid) {
                Some(Ok(devices)) => {
                    out.insert(claim.uid.clone(), devices.clone());
                }
                Some(Err(message)) => {
                    return Err(claim_failed(PREPARE, driver, pod, claim, &message.message));
                }
                None => {}
            }
        }
        check_skipped(PREPARE, driver, pod, batch, &results)?;
        Ok(out)
    }

    /// One NodeUnprepareResources call: per claim uid, success or the claim's error.
    async fn call_unprepare(
        &self,
        pod: &str,
        driver: &str,
        batch: &[ClaimRef],
    ) -> Result<BTreeMap<String, Result<(), DraManagerError>>, DraManagerError> {
        let results = self.drivers.node_unprepare_resources(driver, batch).await;
        let results = check_answer(UNPREPARE, driver, pod, batch, results)?;
        check_skipped(UNPREPARE, driver, pod, batch, &results)?;
        Ok(batch
            .iter()
            .filter_map(|claim| {
                let result = results.get(&claim.uid)?;
                Some((
                    claim.uid.clone(),
                    result
                        .clone()
                        .map_err(|e| claim_failed(UNPREPARE, driver, pod, claim, &e.message)),
                ))
            })
            .collect())
    }

    /// Release the pod's claims (upstream `UnprepareResources`, driven by the cache's pod
    /// references, so it also works for pods only the checkpoint remembers). Idempotent.
    ///
    /// A claim other pods still reference only loses this pod's reference; a claim only
    /// this pod references is sent to its drivers and leaves the cache and the checkpoint
    /// once every driver succeeded. A failed claim keeps its reference, for a retry.
    pub async fn unprepare_resources(&self, pod_uid: &str) -> Result<(), DraManagerError> {
        let _operation = self.operations.lock().await;
        let mut plan = Plan::default();
        {
            let mut inner = self.lock();
            inner.alive()?;
            let mut changed = false;
            for key in inner.cache.claims_of_pod(pod_uid) {
                let info = inner.cache.get_by_key_mut(&key).expect("listed");
                if info.pod_count() > 1 {
                    info.delete_pod_reference(pod_uid);
                    changed = true;
                    tracing::debug!(pod_uid, claim = %key, "resource claim still used by other pods");
                    continue;
                }
                plan.add(info);
            }
            if changed || inner.unstaged {
                inner.sync_to_checkpoint()?;
            }
        }
        self.make_durable().await?;
        let Plan {
            batches,
            claims: planned,
        } = plan;

        let mut outcome: BTreeMap<(String, String), Result<(), DraManagerError>> = BTreeMap::new();
        let mut call_errors = Vec::new();
        for (driver, batch) in &batches {
            tracing::info!(pod_uid, driver = %driver, claims = %list(batch), "NodeUnprepareResources");
            if !self.drivers.is_registered(driver) {
                let first = &batch[0];
                call_errors.push(DraManagerError::DriverNotRegistered {
                    driver: driver.clone(),
                    pod: pod_uid.to_owned(),
                    claim: first.key(),
                });
                continue;
            }
            match self.call_unprepare(pod_uid, driver, batch).await {
                Ok(results) => {
                    for (uid, result) in results {
                        outcome.insert((uid, driver.clone()), result);
                    }
                }
                Err(err) => call_errors.push(err),
            }
        }

        let first_error = {
            let mut inner = self.lock();
            inner.alive()?;
            inner.faults.crash_if(CrashPoint::AfterUnprepare)?;
            let mut first_error = call_errors.into_iter().next();
            let mut changed = false;
            for plan in &planned {
                let mut done = true;
                for driver in &plan.drivers {
                    match outcome.remove(&(plan.claim.uid.clone(), driver.clone())) {
                        Some(Ok(())) => {}
                        Some(Err(err)) => {
                            done = false;
                            first_error.get_or_insert(err);
                        }
                        None => done = false,
                    }
                }
                if !done {
                    continue;
                }
                let key = plan.claim.key();
                let still_ours = inner.cache.get_by_key(&key).is_some_and(|info| {
                    info.uid() == plan.claim.uid && info.pod_uids().all(|p| p == pod_uid)
                });
                if still_ours {
                    inner.cache.delete_by_key(&key);
                    changed = true;
                    tracing::info!(pod_uid, claim = %key, "resource claim unprepared");
                }
            }
            if changed || inner.unstaged {
                inner.sync_to_checkpoint()?;
            }
            first_error
        };
        self.make_durable().await?;
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Whether any cached claim references the pod (upstream
    /// `PodMightNeedToUnprepareResources`).
    pub fn pod_might_need_to_unprepare_resources(&self, pod_uid: &str) -> bool {
        self.lock().cache.has_pod_reference(pod_uid)
    }

    /// A copy of a cached claim.
    pub fn claim_info(&self, namespace: &str, claim_name: &str) -> Option<ClaimInfo> {
        self.lock().cache.get(claim_name, namespace).cloned()
    }

    /// Copies of all cached claims, in `namespace/name` order.
    pub fn claim_infos(&self) -> Vec<ClaimInfo> {
        self.lock().cache.iter().cloned().collect()
    }
}

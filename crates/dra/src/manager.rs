//! The DRA manager ([`Manager`], upstream `ManagerImpl`): prepares a pod's resource claims
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
//! once; [`Manager::get_resources`] and the queries never wait for a driver.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use corral_topology::Container;

use crate::cdi;
use crate::claim::{ClaimRef, PodClaims, ResourceClaim, claim_key};
use crate::claim_cache::ClaimInfoCache;
use crate::claim_info::{ClaimInfo, PreparedDevice};
use crate::driver::DriverClients;
use crate::error::DraError;
use crate::state::{FileStateStore, StateStore};

const PREPARE: &str = "NodePrepareResources";
const UNPREPARE: &str = "NodeUnprepareResources";

/// A point inside an operation where a manager configured to crash there stops, as if the
/// process had been killed (fault injection for crash-consistency tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CrashPoint {
    /// Prepare: after the claims are recorded in the checkpoint, before any driver call.
    AfterRecord,
    /// Prepare: after the drivers prepared, before their devices are checkpointed.
    AfterPrepare,
    /// Unprepare: after the drivers unprepared, before the claims leave the checkpoint.
    AfterUnprepare,
}

/// Manager settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagerConfig {
    /// Add CDI annotations (`cdi.k8s.io/<driver>_<claim uid>`) to [`ContainerInfo`] for
    /// runtimes without CRI `CDIDevices` support (upstream did up to v1.30).
    pub cdi_annotations: bool,
    /// Stop dead at this point of an operation (tests only).
    pub crash_at: Option<CrashPoint>,
}

/// What a container gets from its claims.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Fully qualified CDI device ids, in the order of the pod's claims.
    pub cdi_devices: Vec<String>,
    /// CDI annotations, when [`ManagerConfig::cdi_annotations`] is set.
    pub annotations: BTreeMap<String, String>,
}

struct Inner {
    cache: ClaimInfoCache,
    store: Box<dyn StateStore>,
    crashed: Option<CrashPoint>,
}

impl Inner {
    fn sync_to_checkpoint(&self) -> Result<(), DraError> {
        self.store.store(&self.cache.to_checkpoint())
    }

    fn alive(&self) -> Result<(), DraError> {
        match self.crashed {
            Some(point) => Err(DraError::Crashed(point)),
            None => Ok(()),
        }
    }
}

/// The DRA manager.
pub struct Manager<D> {
    drivers: D,
    config: ManagerConfig,
    inner: Mutex<Inner>,
    operations: tokio::sync::Mutex<()>,
}

impl<D> std::fmt::Debug for Manager<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("config", &self.config)
            .field("claims", &self.lock().cache.len())
            .finish_non_exhaustive()
    }
}

impl<D> Manager<D> {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One claim a prepare or unprepare call works on.
struct Planned {
    claim: ClaimRef,
    drivers: Vec<String>,
}

impl<D: DriverClients> Manager<D> {
    /// A manager over `dra_manager_state` in `state_dir`.
    pub fn open(state_dir: impl AsRef<std::path::Path>, drivers: D) -> Result<Self, DraError> {
        Self::new(
            FileStateStore::open(state_dir)?,
            drivers,
            ManagerConfig::default(),
        )
    }

    /// A manager restoring its cache from `store` (every claim unprepared).
    pub fn new(
        store: impl StateStore,
        drivers: D,
        config: ManagerConfig,
    ) -> Result<Self, DraError> {
        let checkpoint = store.get_or_create()?;
        let cache = ClaimInfoCache::from_checkpoint(&checkpoint);
        tracing::info!(claims = cache.len(), "DRA manager restored its claim cache");
        Ok(Manager {
            drivers,
            config,
            inner: Mutex::new(Inner {
                cache,
                store: Box::new(store),
                crashed: None,
            }),
            operations: tokio::sync::Mutex::new(()),
        })
    }

    /// The drivers this manager calls.
    pub fn drivers(&self) -> &D {
        &self.drivers
    }

    fn crash_if(&self, inner: &mut Inner, point: CrashPoint) -> Result<(), DraError> {
        if self.config.crash_at == Some(point) {
            tracing::warn!(?point, "injected crash");
            inner.crashed = Some(point);
            return Err(DraError::Crashed(point));
        }
        Ok(())
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
    ) -> Result<(), DraError> {
        let _operation = self.operations.lock().await;
        let pod_name = pod.display_name();
        let wanted = resolve_claims(pod, claims)?;

        // Record: validate everything first, then add entries and references, checkpoint.
        let (batches, planned) = {
            let mut inner = self.lock();
            inner.alive()?;
            let mut to_prepare = Vec::new();
            for claim in &wanted {
                match inner.cache.get(&claim.name, &claim.namespace) {
                    Some(info) if info.uid() != claim.uid => {
                        return Err(DraError::ClaimUidMismatch {
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
            let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
            let mut planned = Vec::new();
            for info in &to_prepare {
                let drivers: Vec<String> = info.drivers().map(str::to_owned).collect();
                for driver in &drivers {
                    if !self.drivers.is_registered(driver) {
                        return Err(DraError::DriverNotRegistered {
                            driver: driver.clone(),
                            pod: pod_name.clone(),
                            claim: claim_key(info.namespace(), info.name()),
                        });
                    }
                    batches
                        .entry(driver.clone())
                        .or_default()
                        .push(info.claim_ref());
                }
                planned.push(Planned {
                    claim: info.claim_ref(),
                    drivers,
                });
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
            if changed {
                inner.sync_to_checkpoint()?;
            }
            self.crash_if(&mut inner, CrashPoint::AfterRecord)?;
            (batches, planned)
        };
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
        let mut inner = self.lock();
        inner.alive()?;
        self.crash_if(&mut inner, CrashPoint::AfterPrepare)?;
        for plan in &planned {
            let Some(info) = inner.cache.get_mut(&plan.claim.name, &plan.claim.namespace) else {
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
    ) -> Result<BTreeMap<String, Vec<PreparedDevice>>, DraError> {
        let results = self
            .drivers
            .node_prepare_resources(driver, batch)
            .await
            .map_err(|source| DraError::DriverCall {
                call: PREPARE,
                driver: driver.to_owned(),
                pod: pod.to_owned(),
                claims: list(batch),
                source,
            })?;
        let results = check_coverage(PREPARE, driver, pod, batch, results)?;
        let mut out = BTreeMap::new();
        for claim in batch {
            match results.get(&claim.uid) {
                Some(Ok(devices)) => {
                    out.insert(claim.uid.clone(), devices.clone());
                }
                Some(Err(message)) => {
                    return Err(claim_failed(PREPARE, driver, pod, claim, message));
                }
                None => {}
            }
        }
        Ok(out)
    }

    /// One NodeUnprepareResources call: per claim uid, success or the claim's error.
    async fn call_unprepare(
        &self,
        pod: &str,
        driver: &str,
        batch: &[ClaimRef],
    ) -> Result<BTreeMap<String, Result<(), DraError>>, DraError> {
        let results = self
            .drivers
            .node_unprepare_resources(driver, batch)
            .await
            .map_err(|source| DraError::DriverCall {
                call: UNPREPARE,
                driver: driver.to_owned(),
                pod: pod.to_owned(),
                claims: list(batch),
                source,
            })?;
        let results = check_coverage(UNPREPARE, driver, pod, batch, results)?;
        Ok(batch
            .iter()
            .filter_map(|claim| {
                let result = results.get(&claim.uid)?;
                Some((
                    claim.uid.clone(),
                    result
                        .clone()
                        .map_err(|m| claim_failed(UNPREPARE, driver, pod, claim, &m)),
                ))
            })
            .collect())
    }

    /// The CDI devices (and, if configured, annotations) of the container's claims: for
    /// each pod claim the container names, the devices of the request it names, or of the
    /// whole claim (upstream `GetResources`).
    pub fn get_resources(
        &self,
        pod: &PodClaims,
        container: &Container,
    ) -> Result<ContainerInfo, DraError> {
        let inner = self.lock();
        inner.alive()?;
        let mut out = ContainerInfo::default();
        let mut annotated: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for pod_claim in &pod.claims {
            let Some(claim_name) = &pod_claim.claim_name else {
                continue;
            };
            for used in container.claims.iter().filter(|c| c.name == pod_claim.name) {
                let info = inner.cache.get(claim_name, &pod.namespace).ok_or_else(|| {
                    DraError::ClaimNotCached {
                        pod: pod.display_name(),
                        container: container.name.clone(),
                        claim: claim_key(&pod.namespace, claim_name),
                    }
                })?;
                let request = used.request.as_deref();
                out.cdi_devices.extend(info.cdi_devices(request));
                if self.config.cdi_annotations {
                    for (driver, ids) in info.cdi_devices_by_driver(request) {
                        let key = cdi::annotation_key(&driver, info.uid()).map_err(|message| {
                            DraError::CdiAnnotation {
                                driver: driver.clone(),
                                claim: claim_key(&pod.namespace, claim_name),
                                message,
                            }
                        })?;
                        let entry = annotated.entry(key).or_default();
                        for id in ids {
                            if !entry.contains(&id) {
                                entry.push(id);
                            }
                        }
                    }
                }
            }
        }
        for (key, ids) in annotated {
            let value = cdi::annotation_value(&ids).map_err(|message| DraError::CdiAnnotation {
                driver: key.clone(),
                claim: key.clone(),
                message,
            })?;
            out.annotations.insert(key, value);
        }
        Ok(out)
    }

    /// Release the pod's claims (upstream `UnprepareResources`, driven by the cache's pod
    /// references, so it also works for pods only the checkpoint remembers). Idempotent.
    ///
    /// A claim other pods still reference only loses this pod's reference; a claim only
    /// this pod references is sent to its drivers and leaves the cache and the checkpoint
    /// once every driver succeeded. A failed claim keeps its reference, for a retry.
    pub async fn unprepare_resources(&self, pod_uid: &str) -> Result<(), DraError> {
        let _operation = self.operations.lock().await;
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        let mut planned = Vec::new();
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
                let drivers: Vec<String> = info.drivers().map(str::to_owned).collect();
                for driver in &drivers {
                    batches
                        .entry(driver.clone())
                        .or_default()
                        .push(info.claim_ref());
                }
                planned.push(Planned {
                    claim: info.claim_ref(),
                    drivers,
                });
            }
            if changed {
                inner.sync_to_checkpoint()?;
            }
        }

        let mut outcome: BTreeMap<(String, String), Result<(), DraError>> = BTreeMap::new();
        let mut call_errors = Vec::new();
        for (driver, batch) in &batches {
            tracing::info!(pod_uid, driver = %driver, claims = %list(batch), "NodeUnprepareResources");
            if !self.drivers.is_registered(driver) {
                let first = &batch[0];
                call_errors.push(DraError::DriverNotRegistered {
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

        let mut inner = self.lock();
        inner.alive()?;
        self.crash_if(&mut inner, CrashPoint::AfterUnprepare)?;
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
        if changed {
            inner.sync_to_checkpoint()?;
        }
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

    /// Copies of the cached claims a container uses (upstream `GetContainerClaimInfos`).
    pub fn container_claim_infos(
        &self,
        pod: &PodClaims,
        container: &Container,
    ) -> Result<Vec<ClaimInfo>, DraError> {
        let inner = self.lock();
        let mut out = Vec::new();
        for pod_claim in &pod.claims {
            let Some(claim_name) = &pod_claim.claim_name else {
                continue;
            };
            for _ in container.claims.iter().filter(|c| c.name == pod_claim.name) {
                let info = inner.cache.get(claim_name, &pod.namespace).ok_or_else(|| {
                    DraError::ClaimNotCached {
                        pod: pod.display_name(),
                        container: container.name.clone(),
                        claim: claim_key(&pod.namespace, claim_name),
                    }
                })?;
                out.push(info.clone());
            }
        }
        Ok(out)
    }
}

/// The supplied claims the pod names, checked for reservation; deduplicated by name.
fn resolve_claims<'a>(
    pod: &PodClaims,
    claims: &'a [ResourceClaim],
) -> Result<Vec<&'a ResourceClaim>, DraError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for pod_claim in &pod.claims {
        let Some(name) = &pod_claim.claim_name else {
            tracing::trace!(pod = %pod.display_name(), pod_claim = %pod_claim.name, "no claim generated, nothing to prepare");
            continue;
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        let claim = claims
            .iter()
            .find(|c| &c.name == name && c.namespace == pod.namespace)
            .ok_or_else(|| DraError::ClaimNotSupplied {
                pod: pod.display_name(),
                pod_uid: pod.uid.clone(),
                claim: claim_key(&pod.namespace, name),
            })?;
        if !claim.is_reserved_for(&pod.uid) {
            return Err(DraError::NotReserved {
                pod: pod.display_name(),
                pod_uid: pod.uid.clone(),
                claim: claim.key(),
                claim_uid: claim.uid.clone(),
            });
        }
        out.push(claim);
    }
    Ok(out)
}

/// The answer must name every claim of the batch and no other.
fn check_coverage<T>(
    call: &'static str,
    driver: &str,
    pod: &str,
    batch: &[ClaimRef],
    results: BTreeMap<String, T>,
) -> Result<BTreeMap<String, T>, DraError> {
    if let Some(unknown) = results
        .keys()
        .find(|uid| !batch.iter().any(|c| &c.uid == *uid))
    {
        return Err(DraError::UnknownClaimInResponse {
            call,
            driver: driver.to_owned(),
            pod: pod.to_owned(),
            claim_uid: unknown.clone(),
        });
    }
    let missing: Vec<&ClaimRef> = batch
        .iter()
        .filter(|c| !results.contains_key(&c.uid))
        .collect();
    if !missing.is_empty() {
        return Err(DraError::ClaimsLeftOut {
            call,
            driver: driver.to_owned(),
            pod: pod.to_owned(),
            claims: missing
                .iter()
                .map(|c| format!("{} ({})", c.key(), c.uid))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(results)
}

fn claim_failed(
    call: &'static str,
    driver: &str,
    pod: &str,
    claim: &ClaimRef,
    message: &str,
) -> DraError {
    DraError::ClaimFailed {
        call,
        driver: driver.to_owned(),
        pod: pod.to_owned(),
        claim: claim.key(),
        message: message.to_owned(),
    }
}

fn list(batch: &[ClaimRef]) -> String {
    batch
        .iter()
        .map(ClaimRef::key)
        .collect::<Vec<_>>()
        .join(",")
}

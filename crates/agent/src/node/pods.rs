//! The admitted pods: kept in memory (the CPU manager's [`PodSource`]) and persisted one
//! file per pod under `<root>/corral/pods/` (temp file, fsync, rename, fsync dir), so a
//! restarted agent knows which pods it admitted, their manifests, started containers and
//! affinities, and an admission rewrites only its own pod's file whatever the pod count.
//! File names are the uid with every byte outside `[A-Za-z0-9_-]` percent-encoded: a uid
//! from a manifest never names a path.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};
use corral_checkpoint::Journal;
use corral_cpumgr::{ContainerState, ContainerStatus, PodSource, PodStatus};
use corral_topology::topologymanager::Grant;
use corral_topology::{ContainerKind, Pod};
use serde::{Deserialize, Serialize};

/// One admitted pod as persisted: its manifests (with the uid written in) and the ids of
/// its started containers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodRecord {
    /// The Pod manifest (JSON).
    pub(crate) pod: serde_json::Value,
    /// The ResourceClaim manifests it was admitted with (JSON).
    #[serde(default)]
    pub(crate) claims: Vec<serde_json::Value>,
    /// Container name → container id, for started containers.
    #[serde(default)]
    pub(crate) container_ids: BTreeMap<String, String>,
    /// Container name → the topology manager's decision at admission (the affinity store
    /// is in memory only, as upstream's; a restart restores it from here).
    #[serde(default)]
    pub(crate) affinities: BTreeMap<String, Affinity>,
    /// Container name → what the managers gave it at admission (exclusive CPUs, devices).
    /// A restart checks every manager's restored state against it, so a lost or stale
    /// state file is refused instead of handing the same CPUs or devices out twice.
    /// Absent in records written before corral 0.1.1 (nothing is checked for those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) holdings: Option<BTreeMap<String, Holding>>,
    /// Containers the runtime removed (their exclusive CPUs went back to the pool).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub(crate) removed_containers: std::collections::BTreeSet<String>,
    /// A decision for the pod (or one of its containers) ran out of the topology
    /// manager's search budget: its affinities are the best found, not proven upstream's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) approximate: bool,
}

/// What one container was given at admission, as the managers' state files must still say.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Holding {
    /// Exclusive CPUs (Linux list format), for app containers and sidecars; init
    /// containers' CPUs may go back to the pool once they ran, so they are not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exclusive_cpus: Option<String>,
    /// Device-plugin resource → device ids.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) devices: BTreeMap<String, Vec<String>>,
    /// Memory type → what the static memory policy pinned, for app containers and
    /// sidecars (init containers' memory goes back once they ran).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) memory: BTreeMap<String, HeldMemory>,
}

impl Holding {
    /// What a container of `kind` holds from what its decision granted it (an init
    /// container's CPUs and memory are not recorded, see the fields).
    pub(crate) fn granted(kind: ContainerKind, grant: &Grant) -> Holding {
        let long_running = kind != ContainerKind::Init;
        let exclusive_cpus = (long_running && !grant.exclusive_cpus.is_empty())
            .then(|| grant.exclusive_cpus.to_string());
        let memory = grant
            .memory
            .iter()
            .filter(|_| long_running)
            .map(|block| {
                let held = HeldMemory {
                    size: block.size,
                    numa_affinity: block.numa_affinity.clone(),
                };
                (block.resource.clone(), held)
            })
            .collect();
        let devices = grant
            .devices
            .iter()
            .map(|(resource, ids)| (resource.clone(), ids.iter().cloned().collect()))
            .collect();
        Holding {
            exclusive_cpus,
            devices,
            memory,
        }
    }
}

/// Bytes of one memory type pinned to NUMA nodes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeldMemory {
    /// Bytes.
    pub(crate) size: u64,
    /// The NUMA nodes.
    pub(crate) numa_affinity: Vec<usize>,
}

/// A persisted topology hint.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Affinity {
    /// The NUMA nodes; `None` for no constraint.
    pub(crate) numa: Option<Vec<usize>>,
    /// Whether the hint was preferred.
    pub(crate) preferred: bool,
}

/// An admitted pod: its record and its converted form.
#[derive(Debug, Clone)]
pub(crate) struct AdmittedPod {
    /// What is persisted.
    pub(crate) record: PodRecord,
    /// The managers' view of the pod.
    pub(crate) pod: Pod,
}

/// The admitted pods, by uid, and the pods being admitted right now.
#[derive(Debug)]
pub(crate) struct PodBook {
    dir: PathBuf,
    pods: Mutex<Book>,
    /// Writes go through the state journal when set (see `journal.rs`).
    journal: Option<Arc<Journal>>,
}

#[derive(Debug, Default)]
struct Book {
    admitted: BTreeMap<String, AdmittedPod>,
    /// Pods whose admission is under way: active for the managers (their stale-state
    /// sweeps must not take back what an in-flight admission was given), not yet admitted.
    admitting: BTreeMap<String, Pod>,
    /// Changes whenever `admitted` or `admitting` does ([`PodSource::generation`]).
    generation: u64,
}

impl PodBook {
    /// Load every pod file in `dir` (missing = no pods); `convert` turns a record into the
    /// managers' pod.
    pub(crate) fn load(
        dir: PathBuf,
        convert: impl Fn(&PodRecord) -> Result<Pod>,
    ) -> Result<PodBook> {
        let mut pods = BTreeMap::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries.collect::<Result<Vec<_>, _>>()?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(err).with_context(|| format!("reading {}", dir.display())),
        };
        for entry in entries {
            let path = entry.path();
            let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
            if hidden || path.extension().and_then(|e| e.to_str()) != Some("json") {
                if is_own_temp_file(&path) {
                    // Left by a write the process did not live to finish: the pod file
                    // it would have replaced is still whole.
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                }
                continue;
            }
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let record: PodRecord = serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a corral pod record", path.display()))?;
            let pod = convert(&record).with_context(|| format!("{}", path.display()))?;
            // Only the record's own file counts: a copy under another name (a backup, a
            // file made behind corral's back) would bring back a pod its release removed.
            let own = record_name(&pod.uid);
            if entry.file_name() != own.as_str() {
                anyhow::bail!(
                    "{}: a record of pod {}, whose record is {own}: remove the file, or \
                     rename it to {own} if it is the pod's only record",
                    path.display(),
                    pod.uid
                );
            }
            pods.insert(pod.uid.clone(), AdmittedPod { record, pod });
        }
        Ok(PodBook {
            dir,
            pods: Mutex::new(Book {
                admitted: pods,
                ..Book::default()
            }),
            journal: None,
        })
    }

    /// Write pod files through `journal`: renamed into place without fsyncs, durable at its
    /// next commit.
    pub(crate) fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    fn write(&self, uid: &str, bytes: &[u8]) -> Result<()> {
        let path = self.file_of(uid);
        match &self.journal {
            Some(journal) => write_journaled(journal, &path, bytes),
            None => write_atomically(&path, bytes),
        }
    }

    fn remove(&self, uid: &str) -> Result<()> {
        let path = self.file_of(uid);
        match &self.journal {
            Some(journal) => journal
                .stage(&path, None, || -> Result<()> {
                    match std::fs::remove_file(&path) {
                        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err.into()),
                        _ => Ok(()),
                    }
                })
                .with_context(|| format!("removing {}", path.display())),
            None => remove_durably(&path),
        }
    }

    /// The file pod `uid` is persisted in.
    pub(crate) fn file_of(&self, uid: &str) -> PathBuf {
        self.dir.join(record_name(uid))
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pod with `uid`, if admitted.
    pub(crate) fn get(&self, uid: &str) -> Option<AdmittedPod> {
        self.lock().admitted.get(uid).cloned()
    }

    /// The admitted pods' uids (no clones of their records).
    pub(crate) fn uids(&self) -> std::collections::BTreeSet<String> {
        self.lock().admitted.keys().cloned().collect()
    }

    /// The uids the managers must treat as active: admitted and being admitted.
    pub(crate) fn active_uids(&self) -> std::collections::BTreeSet<String> {
        let book = self.lock();
        book.admitted
            .keys()
            .chain(book.admitting.keys())
            .cloned()
            .collect()
    }

    /// How many pods are admitted.
    pub(crate) fn len(&self) -> usize {
        self.lock().admitted.len()
    }

    /// Every admitted pod, by uid.
    pub(crate) fn all(&self) -> Vec<AdmittedPod> {
        self.lock().admitted.values().cloned().collect()
    }

    /// `pod`'s admission starts: active for the managers from now on.
    pub(crate) fn begin_admitting(&self, pod: &Pod) {
        let mut book = self.lock();
        book.admitting.insert(pod.uid.clone(), pod.clone());
        book.generation += 1;
    }

    /// `uid`'s admission ended without admitting it: no longer active.
    pub(crate) fn end_admitting(&self, uid: &str) {
        let mut book = self.lock();
        if book.admitting.remove(uid).is_some() {
            book.generation += 1;
        }
    }

    /// Change the pod `uid` (`None`: not admitted) with `change` and persist it when its
    /// record changed; on a failed write nothing changes. Only that pod is copied and
    /// written, whatever the pod count.
    pub(crate) fn update<T>(
        &self,
        uid: &str,
        change: impl FnOnce(&mut Option<AdmittedPod>) -> T,
    ) -> Result<T> {
        let mut book = self.lock();
        let before = book.admitted.get(uid);
        let mut entry = before.cloned();
        let out = change(&mut entry);
        if entry.as_ref().map(|a| &a.record) != before.map(|b| &b.record) {
            match &entry {
                Some(admitted) => self.write(uid, &serde_json::to_vec(&admitted.record)?)?,
                None => self.remove(uid)?,
            }
        }
        // The pod is admitted (or released) now: its admission, if one ran, is over.
        book.admitting.remove(uid);
        match entry {
            Some(admitted) => {
                book.admitted.insert(uid.to_owned(), admitted);
            }
            None => {
                book.admitted.remove(uid);
            }
        }
        book.generation += 1;
        Ok(out)
    }

    /// The uid of the pod whose container has `container_id`.
    pub(crate) fn pod_of_container(&self, container_id: &str) -> Option<String> {
        self.lock()
            .admitted
            .iter()
            .find(|(_, p)| p.record.container_ids.values().any(|id| id == container_id))
            .map(|(uid, _)| uid.clone())
    }
}

impl PodSource for PodBook {
    fn active_pods(&self) -> Vec<Pod> {
        let book = self.lock();
        book.admitted
            .values()
            .map(|p| &p.pod)
            .chain(book.admitting.values())
            .cloned()
            .collect()
    }

    fn generation(&self) -> Option<u64> {
        Some(self.lock().generation)
    }

    fn pod_status(&self, pod_uid: &str) -> Option<PodStatus> {
        let book = self.lock();
        let admitted = book.admitted.get(pod_uid)?;
        let status = |name: &str| {
            let id = admitted.record.container_ids.get(name);
            ContainerStatus {
                name: name.to_owned(),
                container_id: id.map(|id| format!("cri://{id}")).unwrap_or_default(),
                state: if id.is_some() {
                    ContainerState::Running
                } else {
                    ContainerState::Waiting
                },
            }
        };
        Some(PodStatus {
            init_container_statuses: admitted
                .pod
                .init_containers
                .iter()
                .map(|c| status(&c.name))
                .collect(),
            container_statuses: admitted
                .pod
                .containers
                .iter()
                .map(|c| status(&c.name))
                .collect(),
        })
    }
}

/// The temp file [`write_atomically`] writes `path` through.
fn temp_file_of(path: &Path, dir: &Path) -> PathBuf {
    dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("pod")
    ))
}

/// Whether `path` is a temp file [`write_atomically`] names (`.<name>.json.tmp`).
fn is_own_temp_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') && n.ends_with(".json.tmp"))
}

/// Write `bytes` to `path`: temp file in the same directory, fsync, rename, fsync the dir.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let temp = temp_file_of(path, dir);
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().with_context(|| format!("writing {}", path.display()))
}

/// Write `bytes` to `path` through `journal`: staged, and renamed into place once the
/// journal's commit made it durable (before the journal is active: written at once, made
/// durable by the journal's first snapshot).
fn write_journaled(journal: &Journal, path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temp = temp_file_of(path, dir);
    let write = || -> Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::File::create(&temp)?.write_all(bytes)?;
        std::fs::rename(&temp, path)?;
        Ok(())
    };
    journal
        .stage(path, Some(bytes), write)
        .with_context(|| format!("writing {}", path.display()))
}

/// Remove `path` (gone already is fine) and fsync its directory.
fn remove_durably(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err).with_context(|| format!("removing {}", path.display())),
    }
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))?;
    }
    Ok(())
}

/// The name of pod `uid`'s record: the uid with every byte but `[A-Za-z0-9_-]` escaped
/// (`%XX`), so no uid names a path or a hidden file, and `.json`.
fn record_name(uid: &str) -> String {
    let mut name = String::with_capacity(uid.len() + 5);
    for byte in uid.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            name.push(byte as char);
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    name.push_str(".json");
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uid: &str) -> AdmittedPod {
        AdmittedPod {
            record: PodRecord {
                pod: serde_json::json!({"metadata": {"uid": uid}}),
                ..PodRecord::default()
            },
            pod: Pod {
                uid: uid.to_owned(),
                ..Pod::default()
            },
        }
    }

    #[test]
    fn a_uid_never_names_a_path_and_pods_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let pods_dir = dir.path().join("pods");
        let book = PodBook::load(pods_dir.clone(), |_| Ok(Pod::default())).unwrap();
        let evil = "../../escape";
        book.update(evil, |e| *e = Some(record(evil))).unwrap();
        book.update("plain-uid", |e| *e = Some(record("plain-uid")))
            .unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&pods_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["%2E%2E%2F%2E%2E%2Fescape.json", "plain-uid.json"]);
        assert!(!dir.path().join("escape.json").exists());
        let uid_of = |r: &PodRecord| {
            Ok(Pod {
                uid: r.pod["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                ..Pod::default()
            })
        };
        let reloaded = PodBook::load(pods_dir.clone(), uid_of).unwrap();
        assert!(reloaded.get(evil).is_some() && reloaded.get("plain-uid").is_some());
        reloaded.update(evil, Option::take).unwrap();
        assert_eq!(std::fs::read_dir(&pods_dir).unwrap().count(), 1);

        // A hidden copy of a record is not a record (a release would never remove it);
        // a copy under another name is refused, naming the file the record belongs in.
        let own = pods_dir.join("plain-uid.json");
        std::fs::copy(&own, pods_dir.join(".plain-uid.json")).unwrap();
        let book = PodBook::load(pods_dir.clone(), uid_of).unwrap();
        assert_eq!(book.uids().len(), 1);
        std::fs::copy(&own, pods_dir.join("backup.json")).unwrap();
        let err = PodBook::load(pods_dir.clone(), uid_of).err().unwrap();
        let err = format!("{err:#}");
        assert!(
            err.contains("backup.json") && err.contains("plain-uid.json"),
            "{err}"
        );
    }
}

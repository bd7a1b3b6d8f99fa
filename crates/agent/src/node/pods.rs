//! The admitted pods: kept in memory (the CPU manager's [`PodSource`]) and persisted one
//! file per pod under `<root>/corral/pods/` ([`PodFiles`]: a state file each, through the
//! node's journal), so a restarted agent knows which pods it admitted, their manifests,
//! started containers and affinities, and an admission rewrites only its own pod's file
//! whatever the pod count.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};
use corral_checkpoint::CheckpointStore;
use corral_cpumgr::{ContainerState, ContainerStatus, PodSource, PodStatus};
use corral_topology::Pod;

use super::pod_files::{Found, PodFiles};
use super::pod_record::{self, PodRecord};

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
    files: PodFiles,
    pods: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    admitted: BTreeMap<String, AdmittedPod>,
    /// Pods whose admission is under way: active for the managers (their stale-state
    /// sweeps must not take back what an in-flight admission was given), not yet admitted.
    admitting: BTreeMap<String, Pod>,
    /// Changes whenever `admitted` or `admitting` does ([`PodSource::generation`]).
    generation: u64,
    /// Ids of recorded containers the runtime stopped. Memory only: a stop changes no
    /// decision (what a container holds stays its own while its pod runs), and the runtime
    /// tells a restarted agent again (NRI's Synchronize).
    stopped: std::collections::BTreeSet<String>,
}

impl PodBook {
    /// Load every pod record in `store`'s directory (written through the store's journal
    /// from now on); `convert` turns a record into the managers' pod. Records an older
    /// corral named its own way are renamed (see [`PodFiles`]).
    pub(crate) fn load(
        store: CheckpointStore,
        convert: impl Fn(&PodRecord) -> Result<Pod>,
    ) -> Result<PodBook> {
        let files = PodFiles::new(store);
        let entries = files.entries()?;
        let mut read = Vec::new();
        for entry in &entries {
            let path = entry.path.display();
            let (record, stamp) = pod_record::decode(&entry.bytes)
                .with_context(|| format!("{path}: refused as a pod record"))?;
            let pod = convert(&record).with_context(|| format!("{path}"))?;
            read.push((entry, record, stamp, pod));
        }
        let found: Vec<Found<'_>> = read
            .iter()
            .map(|(entry, record, stamp, pod)| Found {
                entry,
                uid: &pod.uid,
                record,
                stamp: *stamp,
            })
            .collect();
        // Only the record's own file counts: a copy under another name (a backup, a
        // file made behind corral's back) would bring back a pod its release removed.
        files.settle(&found)?;
        let mut pods = BTreeMap::new();
        for (_, record, _, pod) in read {
            pods.insert(pod.uid.clone(), AdmittedPod { record, pod });
        }
        Ok(PodBook {
            files,
            pods: Mutex::new(Book {
                admitted: pods,
                ..Book::default()
            }),
        })
    }

    /// The file pod `uid`'s record is in.
    pub(crate) fn record_path(&self, uid: &str) -> PathBuf {
        self.files.path_of(uid)
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
                Some(admitted) => self.files.write(uid, &admitted.record)?,
                None => self
                    .files
                    .file_of(uid)?
                    .remove()
                    .with_context(|| format!("removing the record of pod {uid}"))?,
            }
        }
        // Ids the record no longer has are no longer stopped containers of it.
        let kept = |id: &String| {
            entry
                .as_ref()
                .is_some_and(|a| a.record.container_ids.values().any(|i| i == id))
        };
        let gone: Vec<String> = before
            .iter()
            .flat_map(|b| b.record.container_ids.values())
            .filter(|id| !kept(id))
            .cloned()
            .collect();
        for id in gone {
            book.stopped.remove(&id);
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

    /// The runtime stopped the recorded container `container_id` (nothing is written).
    pub(crate) fn mark_stopped(&self, container_id: &str) {
        self.lock().stopped.insert(container_id.to_owned());
    }

    /// The recorded container `container_id` runs (again: a runtime may reuse an id).
    pub(crate) fn mark_running(&self, container_id: &str) {
        self.lock().stopped.remove(container_id);
    }

    /// Whether the recorded container `container_id` is stopped.
    pub(crate) fn is_stopped(&self, container_id: &str) -> bool {
        self.lock().stopped.contains(container_id)
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
            let id = id.filter(|id| !book.stopped.contains(*id));
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

    fn uid_of(r: &PodRecord) -> Result<Pod> {
        Ok(Pod {
            uid: r.pod["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ..Pod::default()
        })
    }

    fn load(dir: &std::path::Path) -> Result<PodBook> {
        PodBook::load(CheckpointStore::open(dir).unwrap(), uid_of)
    }

    /// Pod `uid`'s record as corral up to 0.1.x wrote it, under `name`.
    fn write_older(dir: &std::path::Path, uid: &str, name: &str) {
        let bytes = serde_json::to_vec(&record(uid).record).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_uid_never_names_a_path_and_pods_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let pods_dir = dir.path().join("pods");
        let book = load(&pods_dir).unwrap();
        let evil = "../../escape";
        book.update(evil, |e| *e = Some(record(evil))).unwrap();
        book.update("plain-uid", |e| *e = Some(record("plain-uid")))
            .unwrap();
        assert_eq!(
            names(&pods_dir),
            ["plain-uid.json", "u_Li4vLi4vZXNjYXBl.json"]
        );
        assert!(!dir.path().join("escape.json").exists());
        let reloaded = load(&pods_dir).unwrap();
        assert!(reloaded.get(evil).is_some() && reloaded.get("plain-uid").is_some());
        reloaded.update(evil, Option::take).unwrap();
        assert_eq!(names(&pods_dir), ["plain-uid.json"]);

        // A hidden copy of a record is not a record (a release would never remove it);
        // a copy under another name is refused, naming the file the record belongs in.
        let own = pods_dir.join("plain-uid.json");
        std::fs::copy(&own, pods_dir.join(".plain-uid.json")).unwrap();
        let book = load(&pods_dir).unwrap();
        assert_eq!(book.uids().len(), 1);
        std::fs::copy(&own, pods_dir.join("backup.json")).unwrap();
        let err = load(&pods_dir).err().unwrap();
        let err = format!("{err:#}");
        assert!(
            err.contains("backup.json") && err.contains("plain-uid.json"),
            "{err}"
        );
    }

    #[test]
    fn a_uid_too_long_to_name_a_record_is_an_error_that_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let book = load(dir.path()).unwrap();
        let long = "_".repeat(183);
        let err = book
            .update(&long, |e| *e = Some(record(&long)))
            .unwrap_err();
        assert!(format!("{err:#}").contains("too long"), "{err:#}");
        assert!(book.get(&long).is_none());
        assert!(names(dir.path()).is_empty());
    }

    /// Records corral up to 0.1.x wrote (`%XX` escapes, `_` kept) are renamed once; a
    /// crash between writing the new name and removing the old one leaves two identical
    /// files, and the next start removes the old; two different ones are refused.
    #[test]
    fn records_under_an_older_corrals_names_are_renamed_once() {
        let dir = tempfile::tempdir().unwrap();
        let old = |uid: &str, name: &str| write_older(dir.path(), uid, name);
        old("a_b", "a_b.json");
        old("../x", "%2E%2E%2Fx.json");
        old("0b5a7a3e-4f4c", "0b5a7a3e-4f4c.json");
        let book = load(dir.path()).unwrap();
        assert_eq!(book.uids().len(), 3);
        assert_eq!(
            names(dir.path()),
            ["0b5a7a3e-4f4c.json", "u_Li4veA.json", "u_YV9i.json"]
        );
        drop(book);
        assert_eq!(load(dir.path()).unwrap().uids().len(), 3);

        // Written again with a checksum.
        let new = std::fs::read(dir.path().join("u_YV9i.json")).unwrap();
        let (read, stamp) = pod_record::decode(&new).unwrap();
        assert_eq!(
            (read, stamp),
            (record("a_b").record, pod_record::Stamp::Checked)
        );

        // Interrupted after the new name was written: the old one goes.
        old("a_b", "a_b.json");
        assert_eq!(load(dir.path()).unwrap().uids().len(), 3);
        assert!(!dir.path().join("a_b.json").exists());

        // An old record beside a different new one: neither is guessed at.
        let mut changed = record("a_b");
        changed.record.approximate = true;
        std::fs::write(
            dir.path().join("a_b.json"),
            serde_json::to_vec(&changed.record).unwrap(),
        )
        .unwrap();
        let err = format!("{:#}", load(dir.path()).err().unwrap());
        assert!(
            err.contains("a_b.json") && err.contains("u_YV9i.json") && err.contains("differ"),
            "{err}"
        );
    }

    /// An older corral's name can be another pod's new name: pod `a_b`'s new name is
    /// `u_YV9i.json`, where an older corral kept pod `u_YV9i`. That one moves first (to
    /// `u_dV9ZVjlp.json`), then `a_b` takes its name; nothing is refused or lost, and a crash
    /// after any step leaves what the next start finishes.
    #[test]
    fn an_older_name_that_is_another_pods_new_name_moves_first() {
        let dir = tempfile::tempdir().unwrap();
        let old = |uid: &str, name: &str| write_older(dir.path(), uid, name);
        old("a_b", "a_b.json");
        old("u_YV9i", "u_YV9i.json");
        let book = load(dir.path()).unwrap();
        assert!(book.get("a_b").is_some() && book.get("u_YV9i").is_some());
        assert_eq!(names(dir.path()), ["u_YV9i.json", "u_dV9ZVjlp.json"]);
        drop(book);
        let book = load(dir.path()).unwrap();
        let uid_in = |name: &str| {
            let bytes = std::fs::read(dir.path().join(name)).unwrap();
            pod_record::decode(&bytes).unwrap().0.pod["metadata"]["uid"].clone()
        };
        assert_eq!(uid_in("u_YV9i.json"), "a_b");
        assert_eq!(uid_in("u_dV9ZVjlp.json"), "u_YV9i");
        assert_eq!(book.uids().len(), 2);

        // Cut short after the first move (u_YV9i written at its new name, its old file
        // still there): the next start finishes.
        let dir = tempfile::tempdir().unwrap();
        let old = |uid: &str, name: &str| write_older(dir.path(), uid, name);
        old("a_b", "a_b.json");
        old("u_YV9i", "u_YV9i.json");
        std::fs::write(
            dir.path().join("u_dV9ZVjlp.json"),
            pod_record::encode(&record("u_YV9i").record).unwrap(),
        )
        .unwrap();
        let book = load(dir.path()).unwrap();
        assert_eq!(book.uids().len(), 2);
        assert_eq!(names(dir.path()), ["u_YV9i.json", "u_dV9ZVjlp.json"]);
    }
}

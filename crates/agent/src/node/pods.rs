//! The admitted pods: kept in memory (the CPU manager's [`PodSource`]) and persisted as
//! `<root>/corral/pods.json` (temp file, fsync, rename, fsync dir) so a restarted agent knows
//! which pods it admitted, their manifests and their started containers.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};
use corral_cpumgr::{ContainerState, ContainerStatus, PodSource, PodStatus};
use corral_topology::Pod;
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
}

/// A persisted topology hint.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Affinity {
    /// The NUMA nodes; `None` for no constraint.
    pub(crate) numa: Option<Vec<usize>>,
    /// Whether the hint was preferred.
    pub(crate) preferred: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PodsFile {
    pods: BTreeMap<String, PodRecord>,
}

/// An admitted pod: its record and its converted form.
#[derive(Debug, Clone)]
pub(crate) struct AdmittedPod {
    /// What is persisted.
    pub(crate) record: PodRecord,
    /// The managers' view of the pod.
    pub(crate) pod: Pod,
}

/// The admitted pods, by uid.
#[derive(Debug)]
pub(crate) struct PodBook {
    path: PathBuf,
    pods: Mutex<BTreeMap<String, AdmittedPod>>,
}

impl PodBook {
    /// Load `path` (missing = no pods); `convert` turns a record into the managers' pod.
    pub(crate) fn load(
        path: PathBuf,
        convert: impl Fn(&PodRecord) -> Result<Pod>,
    ) -> Result<PodBook> {
        let file: PodsFile = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a corral pods file", path.display()))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => PodsFile::default(),
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        };
        let mut pods = BTreeMap::new();
        for (uid, record) in file.pods {
            let pod = convert(&record).with_context(|| format!("{}: pod {uid}", path.display()))?;
            pods.insert(uid, AdmittedPod { record, pod });
        }
        Ok(PodBook {
            path,
            pods: Mutex::new(pods),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, AdmittedPod>> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pod with `uid`, if admitted.
    pub(crate) fn get(&self, uid: &str) -> Option<AdmittedPod> {
        self.lock().get(uid).cloned()
    }

    /// Every admitted pod, by uid.
    pub(crate) fn all(&self) -> Vec<AdmittedPod> {
        self.lock().values().cloned().collect()
    }

    /// Change the pods with `change` and persist; on a failed write the change is undone.
    pub(crate) fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, AdmittedPod>) -> T,
    ) -> Result<T> {
        let mut pods = self.lock();
        let before = pods.clone();
        let out = change(&mut pods);
        let file = PodsFile {
            pods: pods
                .iter()
                .map(|(uid, p)| (uid.clone(), p.record.clone()))
                .collect(),
        };
        if let Err(err) = write_atomically(&self.path, &serde_json::to_vec_pretty(&file)?) {
            *pods = before;
            return Err(err);
        }
        Ok(out)
    }
}

impl PodSource for PodBook {
    fn active_pods(&self) -> Vec<Pod> {
        self.lock().values().map(|p| p.pod.clone()).collect()
    }

    fn pod_status(&self, pod_uid: &str) -> Option<PodStatus> {
        let pods = self.lock();
        let admitted = pods.get(pod_uid)?;
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

/// Write `bytes` to `path`: temp file in the same directory, fsync, rename, fsync the dir.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let temp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("pods")
    ));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().with_context(|| format!("writing {}", path.display()))
}

//! Where each admitted pod's record lives: one [`StateFile`] per pod in the pods directory's
//! [`CheckpointStore`] (`<root>/corral/pods/`, through the node's journal), named after the
//! pod's uid; and the read of that directory at start, which renames records an older
//! corral wrote under its own naming.
//!
//! A record is `<uid>.json` when the uid is letters, digits and `-`, starting with a letter
//! or a digit (every uid Kubernetes makes); any other uid is `u_`, the uid's bytes in
//! unpadded URL-safe base64, and `.json`. So a uid never names a path or a hidden file, two
//! uids never share a name (only encoded names hold `_`), and every name is a valid
//! checkpoint key: every uid admission accepts (at most 128 bytes) fits its 250 characters.
//!
//! corral up to 0.1.x escaped as `%XX` and kept `_`: such names are read once, written
//! under the new name and removed ([`PodFiles::settle`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use corral_checkpoint::{CheckpointStore, StateFile, validate_key};

use super::pod_record::{self, PodRecord, Stamp};

/// One record file found in the pods directory.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The file name.
    pub(crate) name: String,
    /// The file.
    pub(crate) path: PathBuf,
    /// Its bytes.
    pub(crate) bytes: Vec<u8>,
}

/// The pods directory.
#[derive(Debug)]
pub(crate) struct PodFiles {
    store: CheckpointStore,
}

impl PodFiles {
    /// The records in `store`'s directory.
    pub(crate) fn new(store: CheckpointStore) -> PodFiles {
        PodFiles { store }
    }

    /// Pod `uid`'s record file; an error when the uid cannot name one.
    pub(crate) fn file_of(&self, uid: &str) -> Result<StateFile> {
        let name = record_name(uid).with_context(|| {
            format!(
                "pod uid {uid:?} is too long to name its record (at most 245 letters, digits \
                 and '-', or 182 bytes of anything else)"
            )
        })?;
        StateFile::in_store(&self.store, &name).context("naming the pod record")
    }

    /// The path pod `uid`'s record has (for messages).
    pub(crate) fn path_of(&self, uid: &str) -> PathBuf {
        self.store
            .dir()
            .join(record_name(uid).unwrap_or_else(|| encoded_name(uid)))
    }

    /// Every record file (names ending `.json` that do not start with `.`); temporary files
    /// an older corral's interrupted write left are removed (the checkpoint store removes
    /// its own at open).
    pub(crate) fn entries(&self) -> Result<Vec<Entry>> {
        let dir = self.store.dir();
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                anyhow::bail!("{}: not a corral pod record name", path.display());
            };
            if name.starts_with('.') {
                if name.ends_with(".json.tmp") {
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                }
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            entries.push(Entry { name, path, bytes });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Bring the records found at start to their own names, written with a checksum:
    /// every name is first checked (a name that is neither the pod's nor the one an older
    /// corral gave it is refused before anything is written); an older corral's name is
    /// written under the new one and removed — in an order where no write lands on a file
    /// another pod's record still occupies (an older name can be another uid's new name);
    /// an older record beside the same record under its new name (a rename cut short) is
    /// removed, beside a different one refused; a record without a checksum is written
    /// again with one. Each step is a durable write then a durable removal, so a crash at
    /// any point leaves every record whole under one of its names, and the next start goes
    /// on from there.
    pub(crate) fn settle(&self, found: &[Found<'_>]) -> Result<()> {
        let mut at: BTreeMap<String, &str> = BTreeMap::new();
        let mut own: BTreeMap<&str, &Found<'_>> = BTreeMap::new();
        let mut older = Vec::new();
        for f in found {
            at.insert(f.entry.name.clone(), f.uid);
            let own_path = self.path_of(f.uid);
            if Some(f.entry.name.as_str()) == own_path.file_name().and_then(|n| n.to_str()) {
                own.insert(f.uid, f);
            } else if f.entry.name == legacy_record_name(f.uid) {
                older.push(f);
            } else {
                anyhow::bail!(
                    "{}: a record of pod {}, whose record is {}: remove the file, or rename \
                     it to that if it is the pod's only record",
                    f.entry.path.display(),
                    f.uid,
                    own_path.display()
                );
            }
        }
        // A rename cut short: the older file goes if the new one says the same.
        let mut pending = Vec::new();
        for f in older {
            match own.get(f.uid) {
                Some(new) if new.record == f.record => {
                    remove_durably(&f.entry.path)?;
                    at.remove(&f.entry.name);
                }
                Some(new) => anyhow::bail!(
                    "{} and {} are both records of pod {} and differ: keep the right one, \
                     under the second name",
                    f.entry.path.display(),
                    new.entry.path.display(),
                    f.uid
                ),
                None => pending.push(f),
            }
        }
        while !pending.is_empty() {
            let before = pending.len();
            let mut waiting = Vec::new();
            for f in pending {
                let target = self.path_of(f.uid);
                let name = target
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                if at.get(name).is_some_and(|uid| *uid != f.uid) {
                    waiting.push(f);
                    continue;
                }
                self.write(f.uid, f.record)?;
                remove_durably(&f.entry.path)?;
                at.remove(&f.entry.name);
                at.insert(name.to_owned(), f.uid);
                tracing::info!(from = %f.entry.path.display(), to = %target.display(),
                    "pod record renamed from an older corral's naming");
            }
            anyhow::ensure!(
                waiting.len() < before,
                "pod records wait on each other's names: {}",
                waiting
                    .iter()
                    .map(|f| f.entry.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            pending = waiting;
        }
        for f in own.values().filter(|f| f.stamp == Stamp::Unchecked) {
            self.write(f.uid, f.record)?;
        }
        Ok(())
    }

    /// Stage pod `uid`'s record.
    pub(crate) fn write(&self, uid: &str, record: &PodRecord) -> Result<()> {
        self.file_of(uid)?
            .stage(&pod_record::encode(record)?)
            .with_context(|| format!("writing the record of pod {uid}"))
    }
}

/// A record found at start: its file, its pod's uid, what it says and how it was stored.
#[derive(Debug)]
pub(crate) struct Found<'a> {
    /// The file.
    pub(crate) entry: &'a Entry,
    /// The pod's uid.
    pub(crate) uid: &'a str,
    /// The record.
    pub(crate) record: &'a PodRecord,
    /// With a checksum or not.
    pub(crate) stamp: Stamp,
}

/// Remove `path` and fsync its directory.
fn remove_durably(path: &Path) -> Result<()> {
    std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))?;
    }
    Ok(())
}

/// The name of pod `uid`'s record (see the module documentation); `None` when too long.
fn record_name(uid: &str) -> Option<String> {
    let plain = uid
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let name = if plain {
        format!("{uid}.json")
    } else {
        encoded_name(uid)
    };
    validate_key(&name).is_ok().then_some(name)
}

/// `u_`, the uid in unpadded URL-safe base64, `.json`.
fn encoded_name(uid: &str) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uid);
    format!("u_{encoded}.json")
}

/// The name corral up to 0.1.x gave pod `uid`'s record: every byte but `[A-Za-z0-9_-]` as
/// `%XX`, `.json`.
fn legacy_record_name(uid: &str) -> String {
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

    #[test]
    fn kubernetes_uids_keep_their_name_and_no_two_uids_share_one() {
        let uid = "0b5a7a3e-4f4c-4d7e-9a8e-1c2b3d4e5f60";
        assert_eq!(record_name(uid).unwrap(), format!("{uid}.json"));
        assert_eq!(record_name(uid).unwrap(), legacy_record_name(uid));
        let uids = [
            "a_b", "a-b", "u_a", "-a", "_a", "", ".", "..", "a.json", "../x", "A", "a", "é",
        ];
        let names: std::collections::BTreeSet<String> =
            uids.iter().map(|u| record_name(u).unwrap()).collect();
        assert_eq!(names.len(), uids.len(), "{names:?}");
        for name in &names {
            validate_key(name).unwrap();
        }
        assert_eq!(record_name("../x").unwrap(), "u_Li4veA.json");
        assert_eq!(record_name(&"a".repeat(245)).unwrap().len(), 250);
        assert_eq!(record_name(&"a".repeat(246)), None);
        assert_eq!(record_name(&"_".repeat(182)).unwrap().len(), 250);
        assert_eq!(record_name(&"_".repeat(183)), None);
        // Every uid admission accepts (at most 128 bytes, see `validate::uid`) has a name.
        assert!(record_name(&"\u{7f}".repeat(128)).is_some());
    }
}

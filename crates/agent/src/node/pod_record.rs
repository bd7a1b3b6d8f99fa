//! What an admitted pod's record holds ([`PodRecord`]: its manifests, started containers,
//! affinities and holdings) and its bytes: the record and a CRC-32 of its JSON, so damage
//! anywhere in the file is refused, never read as another record. Records an older corral
//! wrote (the bare record, no checksum) are read once and written again with one.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use corral_checkpoint::crc32_ieee;
use corral_topology::ContainerKind;
use corral_topology::topologymanager::Grant;
use serde::{Deserialize, Serialize};

/// One admitted pod as persisted: its manifests (with the uid written in) and the ids of
/// its started containers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HeldMemory {
    /// Bytes.
    pub(crate) size: u64,
    /// The NUMA nodes.
    pub(crate) numa_affinity: Vec<usize>,
}

/// A persisted topology hint.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Affinity {
    /// The NUMA nodes; `None` for no constraint.
    pub(crate) numa: Option<Vec<usize>>,
    /// Whether the hint was preferred.
    pub(crate) preferred: bool,
}

/// A record as stored: the record and the CRC-32 (IEEE) of its JSON as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    record: PodRecord,
    checksum: u32,
}

/// The bytes `record` is stored as: [`Stored`]'s JSON, the record serialized once.
pub(crate) fn encode(record: &PodRecord) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(record)?;
    let checksum = crc32_ieee(&json).to_string();
    let mut bytes = Vec::with_capacity(json.len() + 32);
    bytes.extend_from_slice(br#"{"record":"#);
    bytes.extend_from_slice(&json);
    bytes.extend_from_slice(br#","checksum":"#);
    bytes.extend_from_slice(checksum.as_bytes());
    bytes.push(b'}');
    Ok(bytes)
}

/// How a record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// With its checksum.
    Checked,
    /// By corral up to 0.1.x: the bare record (to be written again with a checksum).
    Unchecked,
}

/// The record in `bytes`: a checked one whose checksum matches, or an older corral's bare
/// record; anything else (a damaged file) is an error.
pub(crate) fn decode(bytes: &[u8]) -> Result<(PodRecord, Stamp)> {
    let value: serde_json::Value = serde_json::from_slice(bytes).context("not JSON")?;
    if value.get("pod").is_some() && value.get("record").is_none() {
        let record = serde_json::from_value(value).context("not a corral pod record")?;
        return Ok((record, Stamp::Unchecked));
    }
    let stored: Stored = serde_json::from_value(value).context("not a corral pod record")?;
    let json = serde_json::to_vec(&stored.record)?;
    let computed = crc32_ieee(&json);
    if computed != stored.checksum {
        anyhow::bail!(
            "damaged: its checksum is {}, its content's {computed}",
            stored.checksum
        );
    }
    Ok((stored.record, Stamp::Checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> PodRecord {
        PodRecord {
            pod: serde_json::json!({"metadata": {"uid": "u", "name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
            container_ids: BTreeMap::from([("c".into(), "id".into())]),
            holdings: Some(BTreeMap::from([(
                "c".into(),
                Holding {
                    exclusive_cpus: Some("2-3".into()),
                    ..Holding::default()
                },
            )])),
            ..PodRecord::default()
        }
    }

    #[test]
    fn a_record_round_trips_and_any_flipped_byte_is_refused_or_harmless() {
        let bytes = encode(&record()).unwrap();
        assert_eq!(decode(&bytes).unwrap(), (record(), Stamp::Checked));
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x20, 0x80] {
                let mut damaged = bytes.clone();
                damaged[at] ^= flip;
                if let Ok((read, _)) = decode(&damaged) {
                    assert_eq!(
                        read,
                        record(),
                        "byte {at} ^ {flip:#x} read as another record"
                    );
                }
            }
        }
    }

    #[test]
    fn the_stored_bytes_are_the_json_of_the_record_and_its_checksum() {
        let bytes = encode(&record()).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let json = serde_json::to_vec(&record()).unwrap();
        assert_eq!(value["checksum"], crc32_ieee(&json));
        assert_eq!(value["record"], serde_json::to_value(record()).unwrap());
    }

    #[test]
    fn an_older_corrals_bare_record_is_read_unchecked() {
        let bare = serde_json::to_vec(&record()).unwrap();
        assert_eq!(decode(&bare).unwrap(), (record(), Stamp::Unchecked));
        let err = decode(br#"{"record": {"pod": {}}, "chekcsum": 1}"#).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a corral pod record"),
            "{err:#}"
        );
    }
}

//! The journal's records on disk.
//!
//! ```text
//! record  := "CRJ2" kind:u8 len:u32le crc:u32le payload[len]     crc = CRC32-IEEE(kind ‖ payload)
//! payload := journal_id:u64le seq:u64le count:u32le entry*
//! entry   := path_len:u32le path present:u8 (data_len:u32le data)?
//! ```
//!
//! `kind` 1 is a snapshot (the whole state: every present file; only ever the first record
//! of a journal), 2 a delta (files written or removed since). `journal_id` is drawn when a
//! journal (with its commit mark) is first made and kept by every later record and
//! snapshot of it, so a record of another journal never fits; `seq` is the commit the
//! record makes (a snapshot: the last commit it holds). Paths are relative to the root the
//! journal manages, as bytes; checking that they name one of its files is the replay's job.
//! Journals of the first format (magic `CRLJ`, absolute paths, no sequence numbers) are
//! recognised only to be refused with a remedy.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::hash::{crc32_ieee, crc32_ieee_of};

const MAGIC: &[u8; 4] = b"CRJ2";
/// The first format's magic.
pub(crate) const MAGIC_V1: &[u8; 4] = b"CRLJ";
pub(crate) const HEADER: usize = 4 + 1 + 4 + 4;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The whole state.
    Snapshot,
    /// Changes since the previous record.
    Delta,
}

/// One file's new content (`None`: removed), by its path relative to the root.
pub(crate) type Entry = (PathBuf, Option<Vec<u8>>);

/// Which journal, and which commit, a record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) journal_id: u64,
    pub(crate) seq: u64,
}

/// The bytes of a record of `entries`.
pub(crate) fn encode<'a>(
    kind: Kind,
    stamp: Stamp,
    entries: impl ExactSizeIterator<Item = (&'a PathBuf, Option<&'a [u8]>)>,
) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.push(match kind {
        Kind::Snapshot => 1,
        Kind::Delta => 2,
    });
    payload.extend_from_slice(&stamp.journal_id.to_le_bytes());
    payload.extend_from_slice(&stamp.seq.to_le_bytes());
    payload.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (path, data) in entries {
        let path = path.as_os_str().as_bytes();
        payload.extend_from_slice(&(path.len() as u32).to_le_bytes());
        payload.extend_from_slice(path);
        match data {
            Some(data) => {
                payload.push(1);
                payload.extend_from_slice(&(data.len() as u32).to_le_bytes());
                payload.extend_from_slice(data);
            }
            None => payload.push(0),
        }
    }
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.push(payload[0]);
    out.extend_from_slice(&((payload.len() - 1) as u32).to_le_bytes());
    out.extend_from_slice(&crc32_ieee(&payload).to_le_bytes());
    out.extend_from_slice(&payload[1..]);
    out
}

/// A record read back, and where the next one starts.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) kind: Kind,
    pub(crate) stamp: Stamp,
    pub(crate) entries: Vec<Entry>,
    pub(crate) next: usize,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// `len` bytes of `body` from `*pos`, advancing it.
fn take<'a>(
    body: &'a [u8],
    pos: &mut usize,
    len: usize,
    what: &'static str,
) -> Result<&'a [u8], &'static str> {
    let end = pos.checked_add(len).ok_or(what)?;
    let out = body.get(*pos..end).ok_or(what)?;
    *pos = end;
    Ok(out)
}

/// The record at `at`, or why there is none (a torn or damaged record).
pub(crate) fn decode(bytes: &[u8], at: usize) -> Result<Decoded, &'static str> {
    let header = bytes
        .get(at..at.checked_add(HEADER).ok_or("truncated record header")?)
        .ok_or("truncated record header")?;
    if &header[..4] == MAGIC_V1 {
        return Err("a record of the first journal format");
    }
    if &header[..4] != MAGIC {
        return Err("bad record magic");
    }
    let kind = match header[4] {
        1 => Kind::Snapshot,
        2 => Kind::Delta,
        _ => return Err("unknown record kind"),
    };
    let len = u32_at(header, 5).ok_or("truncated record header")? as usize;
    let crc = u32_at(header, 9).ok_or("truncated record header")?;
    let start = at + HEADER;
    let body = bytes
        .get(start..start.checked_add(len).ok_or("record length overflows")?)
        .ok_or("truncated record")?;
    if crc32_ieee_of(&[&header[4..5], body]) != crc {
        return Err("record checksum mismatch");
    }
    let stamp = Stamp {
        journal_id: u64_at(body, 0).ok_or("truncated record stamp")?,
        seq: u64_at(body, 8).ok_or("truncated record stamp")?,
    };
    let count = u32_at(body, 16).ok_or("truncated entry count")?;
    let mut pos = 20usize;
    let mut entries = Vec::new();
    for _ in 0..count {
        let path_len = u32_at(body, pos).ok_or("truncated entry")? as usize;
        pos += 4;
        let path = take(body, &mut pos, path_len, "truncated path")?;
        let present = *body.get(pos).ok_or("truncated entry")?;
        pos += 1;
        let data = match present {
            0 => None,
            1 => {
                let data_len = u32_at(body, pos).ok_or("truncated entry")? as usize;
                pos += 4;
                Some(take(body, &mut pos, data_len, "truncated data")?.to_vec())
            }
            _ => return Err("bad presence flag"),
        };
        entries.push((PathBuf::from(OsStr::from_bytes(path)), data));
    }
    if pos != body.len() {
        return Err("trailing bytes in record");
    }
    Ok(Decoded {
        kind,
        stamp,
        entries,
        next: start + len,
    })
}

/// What follows damage at some offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterDamage {
    /// No complete, valid record: what a crash during the last commit leaves.
    Nothing,
    /// A valid record at this offset: damage a crash cannot leave.
    Record(usize),
    /// So many record-like fragments from this offset on that checking them all would
    /// cost more than reading the file twice: taken as damage a crash cannot leave.
    TooManyToCheck(usize),
}

/// Whether a complete, valid record starts after `from` (damage followed by one is not
/// what a crash leaves: a crash can only cut the last record). The work is bounded by
/// twice the length of `bytes`, however they were crafted.
pub(crate) fn after_damage(bytes: &[u8], from: usize) -> AfterDamage {
    let mut budget = bytes.len().saturating_mul(2);
    let mut at = from.saturating_add(1);
    while at.saturating_add(HEADER) <= bytes.len() {
        let Some(found) = bytes[at..].windows(MAGIC.len()).position(|w| w == MAGIC) else {
            break;
        };
        at += found;
        let declared = u32_at(bytes, at + 5).map_or(0, |len| len as usize);
        let cost = declared.min(bytes.len() - at) + HEADER;
        if cost > budget {
            return AfterDamage::TooManyToCheck(at);
        }
        budget -= cost;
        if decode(bytes, at).is_ok() {
            return AfterDamage::Record(at);
        }
        at += 1;
    }
    AfterDamage::Nothing
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAMP: Stamp = Stamp {
        journal_id: 0x1234_5678_9abc_def0,
        seq: 7,
    };

    #[test]
    fn round_trip_and_damage() {
        let a = PathBuf::from("cpu_manager_state");
        let b = PathBuf::from("corral/pods/x.json");
        let entries = [(a.clone(), Some(b"{}".to_vec())), (b.clone(), None)];
        let bytes = encode(
            Kind::Delta,
            STAMP,
            entries.iter().map(|(p, d)| (p, d.as_deref())),
        );
        let back = decode(&bytes, 0).unwrap();
        assert_eq!(back.kind, Kind::Delta);
        assert_eq!(back.stamp, STAMP);
        assert_eq!(back.entries, entries);
        assert_eq!(back.next, bytes.len());
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], 0).is_err(), "cut at {cut}");
        }
        for flip in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[flip] ^= 0x40;
            assert!(decode(&bad, 0).is_err(), "flip at {flip}");
        }
    }

    #[test]
    fn a_valid_record_after_damage_is_found() {
        let a = PathBuf::from("f");
        let one = encode(Kind::Delta, STAMP, [(&a, Some(&b"1"[..]))].into_iter());
        let mut bytes = one.clone();
        bytes.extend_from_slice(&one);
        assert_eq!(after_damage(&bytes, 0), AfterDamage::Record(one.len()));
        bytes[3] ^= 1;
        assert_eq!(after_damage(&bytes, 0), AfterDamage::Record(one.len()));
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(after_damage(&bytes, 0), AfterDamage::Nothing);
    }

    /// A file of nothing but record headers, each claiming the rest of the file: checking
    /// them all would be quadratic; the scan stops at its budget and calls it damage.
    #[test]
    fn crafted_fragments_cost_bounded_work() {
        let mut bytes = Vec::new();
        while bytes.len() < 1 << 20 {
            let rest = (1u32 << 20) - bytes.len() as u32;
            bytes.extend_from_slice(MAGIC);
            bytes.push(2);
            bytes.extend_from_slice(&rest.to_le_bytes());
            bytes.extend_from_slice(&[0; 4]);
        }
        assert!(matches!(
            after_damage(&bytes, 0),
            AfterDamage::TooManyToCheck(_)
        ));
    }
}

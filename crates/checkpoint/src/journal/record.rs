//! The journal's records on disk.
//!
//! ```text
//! record  := "CRLJ" kind:u8 len:u32le crc:u32le payload[len]     crc = CRC32-IEEE(kind ‖ payload)
//! payload := count:u32le entry*
//! entry   := path_len:u32le path present:u8 (data_len:u32le data)?
//! ```
//!
//! `kind` 1 is a snapshot (the whole state: every present file; the first record of a
//! journal), 2 a delta (files written or removed since). Paths are absolute, as bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::hash::crc32_ieee;

const MAGIC: &[u8; 4] = b"CRLJ";
const HEADER: usize = 4 + 1 + 4 + 4;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The whole state.
    Snapshot,
    /// Changes since the previous record.
    Delta,
}

/// One file's new content (`None`: removed).
pub(crate) type Entry = (PathBuf, Option<Vec<u8>>);

/// The bytes of a record of `entries`.
pub(crate) fn encode<'a>(
    kind: Kind,
    entries: impl ExactSizeIterator<Item = (&'a PathBuf, Option<&'a [u8]>)>,
) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.push(match kind {
        Kind::Snapshot => 1,
        Kind::Delta => 2,
    });
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
    pub(crate) entries: Vec<Entry>,
    pub(crate) next: usize,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The record at `at`, or why there is none (a torn or damaged tail, or the end).
pub(crate) fn decode(bytes: &[u8], at: usize) -> Result<Decoded, &'static str> {
    let header = bytes
        .get(at..at + HEADER)
        .ok_or("truncated record header")?;
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
    let mut checked = Vec::with_capacity(len + 1);
    checked.push(header[4]);
    checked.extend_from_slice(body);
    if crc32_ieee(&checked) != crc {
        return Err("record checksum mismatch");
    }
    let mut entries = Vec::new();
    let count = u32_at(body, 0).ok_or("truncated entry count")?;
    let mut pos = 4usize;
    for _ in 0..count {
        let path_len = u32_at(body, pos).ok_or("truncated entry")? as usize;
        pos += 4;
        let path = body.get(pos..pos + path_len).ok_or("truncated path")?;
        pos += path_len;
        let present = *body.get(pos).ok_or("truncated entry")?;
        pos += 1;
        let data = match present {
            0 => None,
            1 => {
                let data_len = u32_at(body, pos).ok_or("truncated entry")? as usize;
                pos += 4;
                let data = body.get(pos..pos + data_len).ok_or("truncated data")?;
                pos += data_len;
                Some(data.to_vec())
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
        entries,
        next: start + len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let a = PathBuf::from("/s/cpu_manager_state");
        let b = PathBuf::from("/s/pods/x.json");
        let entries = [(a.clone(), Some(b"{}".to_vec())), (b.clone(), None)];
        let bytes = encode(Kind::Delta, entries.iter().map(|(p, d)| (p, d.as_deref())));
        let back = decode(&bytes, 0).unwrap();
        assert_eq!(back.kind, Kind::Delta);
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
}

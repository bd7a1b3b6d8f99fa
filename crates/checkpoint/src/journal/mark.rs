//! The commit mark: a small file beside the journal that says which commit was last
//! answered, so a replay can tell a journal that lost acknowledged records (cut, damaged,
//! restored from an older copy) from one a crash cut during a commit nobody was told about.
//!
//! ```text
//! mark := slot slot                slot := "CRJM" journal_id:u64le seq:u64le crc:u32le
//! ```
//!
//! `crc` is CRC32-IEEE of the 20 bytes before it. Commit `seq` writes slot `seq % 2` in
//! place (no fsync: the journal record it names is already durable), so a write torn by a
//! power loss spoils one slot and the other still holds the commit before. A new journal's
//! mark names the journal and its snapshot, written in the journal's directory before the
//! journal is renamed into place without an fsync of its own: that directory's one fsync
//! makes its name durable with the journal's, and its bytes are the file system's to keep.
//! After a power loss they may read empty or zeros (*unwritten*: no commit after the
//! journal's snapshot known answered), which only then leaves a journal without its id to
//! check against. It is removed after the journal, so a journal with
//! commits but without its mark is never what a crash leaves. It is a lower bound: after a
//! power loss it may name an older commit than the journal holds, never a newer one.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::hash::crc32_ieee;

const MAGIC: &[u8; 4] = b"CRJM";
const SLOT: usize = 4 + 8 + 8 + 4;
/// The mark's size.
pub(crate) const LEN: usize = 2 * SLOT;

/// The mark's path for a journal at `journal`: `<journal>.mark`.
pub(crate) fn path_for(journal: &Path) -> PathBuf {
    super::files::beside(journal, ".mark")
}

/// The last answered commit of a journal, as the mark tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) journal_id: u64,
    pub(crate) seq: u64,
}

fn slot_bytes(mark: Mark) -> [u8; SLOT] {
    let mut out = [0u8; SLOT];
    out[..4].copy_from_slice(MAGIC);
    out[4..12].copy_from_slice(&mark.journal_id.to_le_bytes());
    out[12..20].copy_from_slice(&mark.seq.to_le_bytes());
    let crc = crc32_ieee(&out[..20]);
    out[20..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn slot_of(bytes: &[u8]) -> Option<Mark> {
    if bytes.len() != SLOT || &bytes[..4] != MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[20..].try_into().ok()?);
    if crc32_ieee(&bytes[..20]) != crc {
        return None;
    }
    Some(Mark {
        journal_id: u64::from_le_bytes(bytes[4..12].try_into().ok()?),
        seq: u64::from_le_bytes(bytes[12..20].try_into().ok()?),
    })
}

/// What the mark beside a journal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// There is no mark.
    Missing,
    /// Made, but no slot written durably yet (empty, or zeros): no commit after the
    /// journal's snapshot is known answered.
    Unwritten,
    /// The last commit known answered.
    Names(Mark),
}

/// What a mark's bytes say: unwritten, the newest valid slot, or why neither.
pub(crate) fn decode(bytes: &[u8]) -> Result<Found, &'static str> {
    if bytes.len() <= LEN && bytes.iter().all(|b| *b == 0) {
        return Ok(Found::Unwritten);
    }
    if bytes.len() == SLOT {
        // Only slot 0 was ever written (the first commit's number was even).
        return slot_of(bytes)
            .map(Found::Names)
            .ok_or("its one slot is not valid");
    }
    if bytes.len() != LEN {
        return Err("not the size of a commit mark");
    }
    let slots = [slot_of(&bytes[..SLOT]), slot_of(&bytes[SLOT..])];
    let mark = match slots {
        [None, None] => Err("neither of its slots is valid"),
        [Some(a), Some(b)] if a.journal_id != b.journal_id => {
            Err("its slots belong to different journals")
        }
        [Some(a), Some(b)] => Ok(if a.seq >= b.seq { a } else { b }),
        [Some(one), None] | [None, Some(one)] => Ok(one),
    };
    mark.map(Found::Names)
}

/// Make a new journal's mark at `path`, replacing any there: both slots name `mark` (the
/// journal's id and its snapshot's commit), written without an fsync of their own (see
/// the module documentation: after a power loss they may read as unwritten).
pub(crate) fn create(path: &Path, mark: Mark) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let slot = slot_bytes(mark);
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(&[slot, slot].concat())
}

/// An open mark, written in place after each commit.
#[derive(Debug)]
pub(crate) struct MarkFile {
    file: File,
}

impl MarkFile {
    /// Open the mark at `path` (made by [`initial`] bytes) for writing in place.
    pub(crate) fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().write(true).open(path)?;
        Ok(MarkFile { file })
    }

    /// Another handle on the same file.
    pub(crate) fn try_clone(&self) -> std::io::Result<Self> {
        Ok(MarkFile {
            file: self.file.try_clone()?,
        })
    }

    /// Record that commit `mark.seq` was made durable (no fsync, see the module docs).
    pub(crate) fn record(&self, mark: Mark) -> std::io::Result<()> {
        let at = (mark.seq % 2) as usize * SLOT;
        self.file.write_all_at(&slot_bytes(mark), at as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(found: Result<Found, &str>) -> u64 {
        match found {
            Ok(Found::Names(mark)) => mark.seq,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_newest_valid_slot_wins_and_one_torn_slot_leaves_the_other() {
        let id = 42;
        let slot = |seq| {
            slot_bytes(Mark {
                journal_id: id,
                seq,
            })
        };
        let bytes = [slot(4), slot(5)].concat();
        assert_eq!(seq(decode(&bytes)), 5);
        for at in SLOT..LEN {
            let mut torn = bytes.clone();
            torn[at] ^= 0x10;
            assert_eq!(seq(decode(&torn)), 4, "damage at {at}");
        }
        for at in 0..SLOT {
            let mut both = bytes.clone();
            both[at] ^= 0x10;
            both[SLOT + at] ^= 0x10;
            assert!(decode(&both).is_err(), "damage at {at}");
        }
        assert!(decode(&bytes[..LEN - 1]).is_err());
    }

    #[test]
    fn a_new_mark_is_unwritten_until_a_slot_is() {
        // Empty as made, or zeros: a size written before its data (a power loss).
        for len in [0, 1, SLOT, LEN] {
            assert_eq!(decode(&vec![0; len]), Ok(Found::Unwritten), "{len} zeros");
        }
        // The first commit wrote slot 0 (an even commit) or slot 1 (after zeros).
        let slot = slot_bytes(Mark {
            journal_id: 7,
            seq: 2,
        });
        assert_eq!(seq(decode(&slot)), 2);
        assert_eq!(
            seq(decode(
                &[
                    [0; SLOT],
                    slot_bytes(Mark {
                        journal_id: 7,
                        seq: 3
                    })
                ]
                .concat()
            )),
            3
        );
        // Anything else is refused: a torn lone slot, a size no mark has, zeros too long.
        let mut torn = slot;
        torn[5] ^= 1;
        assert!(decode(&torn).is_err());
        assert!(decode(&[1u8; 3]).is_err());
        assert!(decode(&[0; LEN + 1]).is_err());
    }
}

//! Reading a journal back: which state its records describe, and whether its end is what
//! a crash leaves (repaired) or damage (refused).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::files::{Managed, is_managed};
use super::mark::Found;
use super::record::{self, AfterDamage, Kind, MAGIC_V1, Stamp};
use crate::journal_error::JournalError;

/// The state a journal's records describe.
#[derive(Debug)]
pub(crate) struct Replayed {
    /// Which journal, and the last commit it holds.
    pub(crate) stamp: Stamp,
    /// Every present file, by relative path.
    pub(crate) view: BTreeMap<PathBuf, Vec<u8>>,
    /// Whole records read.
    pub(crate) records: usize,
    /// What ended the replay before the end of the file, if anything (a commit a crash cut
    /// short, which nobody was told about).
    pub(crate) torn_tail: Option<String>,
}

/// The state `bytes` (the journal at `path`) describe, checked against `mark` (the last
/// answered commit) and `managed` (the files a record may name).
pub(crate) fn replay(
    path: &Path,
    mark_path: &Path,
    bytes: &[u8],
    mark: Found,
    managed: &[Managed],
) -> Result<Replayed, JournalError> {
    let damaged = |offset: usize, why: String| JournalError::Damaged {
        path: path.to_path_buf(),
        offset: offset as u64,
        why,
    };
    if bytes.starts_with(MAGIC_V1) {
        return Err(JournalError::OlderFormat {
            path: path.to_path_buf(),
        });
    }
    let first = record::decode(bytes, 0).map_err(|why| damaged(0, why.to_owned()))?;
    if first.kind != Kind::Snapshot {
        return Err(damaged(0, "the first record is not a snapshot".to_owned()));
    }
    let answered = match mark {
        // A first activation cut short before its directory was durable (a file system
        // that kept the journal's rename but not the mark made before it): a journal of
        // its first snapshot alone, which nothing was answered from.
        Found::Missing if first.stamp.seq == 0 && first.next == bytes.len() => 0,
        Found::Missing => {
            return Err(JournalError::MarkUnusable {
                path: path.to_path_buf(),
                mark: mark_path.to_path_buf(),
                why: "is missing".to_owned(),
            });
        }
        Found::Unwritten => first.stamp.seq,
        Found::Names(mark) if mark.journal_id != first.stamp.journal_id => {
            return Err(JournalError::MarkUnusable {
                path: path.to_path_buf(),
                mark: mark_path.to_path_buf(),
                why: format!(
                    "belongs to another journal (id {:016x}, the journal's is {:016x})",
                    mark.journal_id, first.stamp.journal_id
                ),
            });
        }
        Found::Names(mark) => mark.seq,
    };
    let mut out = Replayed {
        stamp: first.stamp,
        view: BTreeMap::new(),
        records: 0,
        torn_tail: None,
    };
    let mut at = 0;
    let mut next = Ok(first);
    loop {
        let record = match next {
            Ok(record) => record,
            Err(why) => {
                match record::after_damage(bytes, at) {
                    AfterDamage::Nothing => {}
                    AfterDamage::Record(valid) => {
                        return Err(damaged(
                            at,
                            format!(
                                "{why}, followed by a valid record at byte {valid} (a crash only cuts the last record)"
                            ),
                        ));
                    }
                    AfterDamage::TooManyToCheck(from) => {
                        return Err(damaged(
                            at,
                            format!(
                                "{why}, followed by too many record-like fragments to check from byte {from}"
                            ),
                        ));
                    }
                }
                out.torn_tail = Some(format!("{why} at byte {at}"));
                break;
            }
        };
        if at != 0 {
            if record.kind == Kind::Snapshot {
                return Err(damaged(at, "a second snapshot".to_owned()));
            }
            let expected = Stamp {
                journal_id: out.stamp.journal_id,
                seq: out.stamp.seq.wrapping_add(1),
            };
            if record.stamp != expected {
                return Err(damaged(
                    at,
                    format!(
                        "a record of commit {} of journal {:016x} where commit {} of {:016x} belongs",
                        record.stamp.seq,
                        record.stamp.journal_id,
                        expected.seq,
                        expected.journal_id
                    ),
                ));
            }
        }
        if let Some((file, _)) = record.entries.iter().find(|(f, _)| !is_managed(managed, f)) {
            return Err(damaged(
                at,
                format!(
                    "it names {}, which is not one of the journal's files",
                    file.display()
                ),
            ));
        }
        out.stamp = record.stamp;
        out.records += 1;
        for (file, data) in record.entries {
            match data {
                Some(data) => out.view.insert(file, data),
                None => out.view.remove(&file),
            };
        }
        at = record.next;
        if at == bytes.len() {
            break;
        }
        next = record::decode(bytes, at);
    }
    if answered > out.stamp.seq {
        return Err(JournalError::CommitsMissing {
            path: path.to_path_buf(),
            mark: mark_path.to_path_buf(),
            offset: at as u64,
            ends_at: out.stamp.seq,
            answered,
        });
    }
    Ok(out)
}

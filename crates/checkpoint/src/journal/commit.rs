//! Committing: one append and one fsync for everything staged, then the files and the mark.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use super::files::put;
use super::mark::Mark;
use super::record::{self, Kind, Stamp};
use super::{Journal, State};
use crate::error::Result;
use crate::journal_error::JournalError;

impl Journal {
    /// Make everything staged before this call durable: one append and one fsync of the
    /// journal, shared with concurrent committers; then the staged contents are renamed
    /// into place and the commit noted in the mark, and only then does it return.
    ///
    /// A failure ([`JournalError::CommitFailed`]) answered nothing: what was staged stays
    /// staged, and the next commit retries it (rewriting the journal as a snapshot first,
    /// since its tail cannot be trusted). Nothing wedges: once the disk has room again, the
    /// next commit succeeds.
    pub fn commit(&self) -> Result<()> {
        let mut state = self.lock();
        let target = state.staged;
        // Files lagging behind the journal, or a journal to rewrite, are repaired by one
        // commit (an empty one if need be), once per call.
        let mut repaired = false;
        loop {
            let behind = !state.lagging.is_empty() || state.needs_rewrite;
            if state.durable >= target && (repaired || !behind) {
                return Ok(());
            }
            if state.committing {
                state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            let Some(file) = &state.file else {
                return Err(JournalError::NotActive {
                    path: self.path.clone(),
                }
                .into());
            };
            let file = file.try_clone();
            if state.needs_rewrite {
                self.rewrite(&mut state)?;
                continue;
            }
            state.committing = true;
            let batch = std::mem::take(&mut state.pending);
            let upto = state.staged;
            // Nothing staged (only lagging files to write again): no record.
            let appends = !batch.is_empty();
            let stamp = Stamp {
                journal_id: state.stamp.journal_id,
                seq: state.stamp.seq + u64::from(appends),
            };
            let bytes = if appends {
                record::encode(
                    Kind::Delta,
                    stamp,
                    batch.iter().map(|(p, d)| (p, d.as_deref())),
                )
            } else {
                Vec::new()
            };
            drop(state);
            let written = file.and_then(|mut f| {
                if appends {
                    f.write_all(&bytes)?;
                    self.syncs.data(&f)?;
                }
                Ok(())
            });
            state = self.lock();
            if let Err(source) = written {
                // The tail may hold part of this record: rewrite before the next append.
                state.needs_rewrite = true;
                let newer = std::mem::replace(&mut state.pending, batch);
                state.pending.extend(newer);
                state.committing = false;
                let err = JournalError::CommitFailed {
                    path: self.path.clone(),
                    op: "append",
                    source: source.into(),
                };
                state.trouble = Some(err.to_string() + &cause(&err));
                self.done.notify_all();
                return Err(err.into());
            }
            state.stamp = stamp;
            state.size += bytes.len() as u64;
            // Files lagging from an earlier commit first, then this commit's in the order
            // they were first written (a crash between two renames leaves what the program
            // order would: a manager's file ahead of the pod record that names it).
            let mut order: Vec<PathBuf> = std::mem::take(&mut state.lagging).into_iter().collect();
            let mut seen: BTreeSet<PathBuf> = order.iter().cloned().collect();
            for (path, data) in batch {
                match data {
                    Some(data) => state.view.insert(path.clone(), data),
                    None => state.view.remove(&path),
                };
                if seen.insert(path.clone()) {
                    order.push(path);
                }
            }
            let contents: Vec<(PathBuf, Option<Vec<u8>>)> = order
                .into_iter()
                .map(|p| {
                    let data = state.view.get(&p).cloned();
                    (p, data)
                })
                .collect();
            let mark = state.mark.as_ref().map(|m| m.try_clone());
            drop(state);
            let mut lagging = BTreeSet::new();
            let mut troubles = Vec::new();
            for (rel, data) in contents {
                if let Err(err) = put(&self.root.join(&rel), data.as_deref(), None) {
                    troubles.push(format!("{err}{}", cause(&err)));
                    lagging.insert(rel);
                }
            }
            let marked = match mark {
                _ if !appends => Ok(()),
                Some(Ok(mark)) => mark.record(Mark {
                    journal_id: stamp.journal_id,
                    seq: stamp.seq,
                }),
                Some(Err(e)) => Err(e),
                None => Ok(()),
            };
            if let Err(e) = marked {
                troubles.push(format!(
                    "writing the mark {}: {e}",
                    self.mark_path.display()
                ));
            }
            state = self.lock();
            repaired = true;
            state.committing = false;
            state.durable = upto;
            state.trouble = (!troubles.is_empty()).then(|| {
                format!(
                    "commit {} is durable, but {} state files lag behind it: {}",
                    stamp.seq,
                    lagging.len(),
                    troubles.join("; ")
                )
            });
            state.lagging = lagging;
            if state.size > self.options.compact_at {
                self.compact(&mut state);
            }
            self.done.notify_all();
        }
    }

    /// Rewrite the journal as a snapshot of the durable view, after a failure left its
    /// tail or its append handle in doubt.
    fn rewrite(&self, state: &mut State) -> Result<()> {
        match Self::write_snapshot(&self.path, state.stamp, &state.view, &self.syncs) {
            Ok((file, size)) => {
                state.file = Some(file);
                state.size = size;
                state.needs_rewrite = false;
                Ok(())
            }
            Err(err) => {
                let err = JournalError::CommitFailed {
                    path: self.path.clone(),
                    op: "rewrite after a failed commit",
                    source: err.into(),
                };
                state.trouble = Some(err.to_string() + &cause(&err));
                Err(err.into())
            }
        }
    }

    /// Replace the journal by a snapshot of the durable view (writes staged meanwhile are
    /// committed on top of it later). A failure may leave the append handle on a replaced
    /// file: the next commit rewrites the journal first.
    fn compact(&self, state: &mut State) {
        match Self::write_snapshot(&self.path, state.stamp, &state.view, &self.syncs) {
            Ok((file, size)) => {
                state.file = Some(file);
                state.size = size;
            }
            Err(err) => {
                state.needs_rewrite = true;
                state.trouble = Some(format!("compacting: {err}{}", cause(&err)));
            }
        }
    }
}

/// `": source: source's source…"`: the chain below `err`, for messages kept as text.
fn cause(err: &dyn std::error::Error) -> String {
    let mut out = String::new();
    let mut next = err.source();
    while let Some(source) = next {
        out.push_str(": ");
        out.push_str(&source.to_string());
        next = source.source();
    }
    out
}

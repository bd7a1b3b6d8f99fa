//! Why a [`Journal`](crate::Journal) refused to open or could not commit: its own module,
//! so that the crate's error and the journal both name it without naming each other.

use std::path::PathBuf;

/// What to do about a journal that was refused, in every refusal's message.
const REMEDY: &str = "to start from the state files as they are, move the journal and its \
    .mark aside (after a process crash the files hold every answered change; after a power \
    loss they may lag behind it)";

/// Why a `Journal` refused to open, or a commit failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Damage a crash cannot leave: a damaged first record (the snapshot, written before it
    /// replaces the old journal), damage followed by a valid record, a record of another
    /// journal or out of sequence, a record naming a file the journal does not manage.
    #[error("state journal {} is damaged at byte {offset}: {why}; {REMEDY}", path.display())]
    Damaged {
        /// The journal file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// The journal ends before the last commit its mark says was answered: answered
    /// commits were cut from its end (or it was restored from an older copy).
    #[error(
        "state journal {} ends at commit {ends_at} (byte {offset}) but its mark {} says commit \
         {answered} was answered: answered commits are missing from it; {REMEDY}",
        path.display(), mark.display()
    )]
    CommitsMissing {
        /// The journal file.
        path: PathBuf,
        /// The mark file.
        mark: PathBuf,
        /// Where the journal's last whole record ends.
        offset: u64,
        /// The last commit the journal holds.
        ends_at: u64,
        /// The last answered commit, as the mark tells it.
        answered: u64,
    },
    /// The journal's mark is missing, unreadable or belongs to another journal, so a cut
    /// end cannot be told from a crash.
    #[error("state journal {}: its mark {} {why}; {REMEDY}", path.display(), mark.display())]
    MarkUnusable {
        /// The journal file.
        path: PathBuf,
        /// The mark file.
        mark: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A journal of the first format (absolute paths, no commit mark) left by a crash of
    /// an earlier corral, which stops cleanly without leaving one.
    #[error(
        "state journal {} was left by an earlier corral (journal format 1): start that version \
         once and stop it cleanly, or {REMEDY}",
        path.display()
    )]
    OlderFormat {
        /// The journal file.
        path: PathBuf,
    },
    /// The journal or a state file is not a regular file (a FIFO, a device, a directory).
    #[error("{} is a {kind}, not a regular file: remove it, or restore the file", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The journal or a state file is larger than a journal ever holds.
    #[error(
        "{} holds {len} bytes, more than the {max} a state journal holds: remove it, or restore \
         the file",
        path.display()
    )]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The bound (`JournalOptions::max_bytes`).
        max: u64,
    },
    /// A path handed to the journal is not relative to its root, or a write names a file
    /// the journal does not manage.
    #[error("{} is not one of the journal's files (relative to its root)", path.display())]
    NotManaged {
        /// The path.
        path: PathBuf,
    },
    /// Another process (or another `Journal` of this one) has the journal open: its files
    /// are that one's to write.
    #[error(
        "state journal {} is in use by another process (its .lock is held): one agent per root",
        path.display()
    )]
    InUse {
        /// The journal file.
        path: PathBuf,
    },
    /// A commit was asked for before `Journal::activate`.
    #[error("state journal {} is not active: the state it would record was not accepted", path.display())]
    NotActive {
        /// The journal file.
        path: PathBuf,
    },
    /// A commit could not be made durable. Nothing it held was answered; it stays staged
    /// and is retried by the next commit.
    #[error("state journal {} could not commit ({op})", path.display())]
    CommitFailed {
        /// The journal file.
        path: PathBuf,
        /// What failed: `append`, `rewrite`.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

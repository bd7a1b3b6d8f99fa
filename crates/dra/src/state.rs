//! The claim cache's file: the kubelet's `dra_manager_state` (byte-compatible) in a
//! [`StateFile`] — a file in the state directory, written through the agent's journal when
//! it has one, or memory for tests.

use std::path::PathBuf;

use corral_checkpoint::{CheckpointError, DraManagerCheckpoint, StateFile};

use crate::error::DraManagerError;

fn error(file: &StateFile, source: CheckpointError) -> DraManagerError {
    DraManagerError::Checkpoint {
        path: PathBuf::from(file.to_string()),
        source,
    }
}

/// The stored claim list; an empty one, staged, when there is none yet (upstream
/// `GetOrCreate`). A damaged file is an error, never an empty list.
pub(crate) fn load_or_create(file: &StateFile) -> Result<DraManagerCheckpoint, DraManagerError> {
    match file.load_as::<DraManagerCheckpoint>() {
        Ok(Some(checkpoint)) => Ok(checkpoint),
        Ok(None) => {
            let empty = DraManagerCheckpoint {
                claim_info_state_list: Some(Vec::new()),
            };
            stage(file, &empty)?;
            Ok(empty)
        }
        Err(err) => Err(error(file, err)),
    }
}

/// Stage the claim list (durable at once, or at the file's next commit through a journal).
pub(crate) fn stage(
    file: &StateFile,
    checkpoint: &DraManagerCheckpoint,
) -> Result<(), DraManagerError> {
    file.stage_checkpoint(checkpoint)
        .map_err(|err| error(file, err))
}

/// Make what was staged durable; blocking work, run on the blocking pool.
pub(crate) async fn make_durable(file: &StateFile) -> Result<(), DraManagerError> {
    let committing = file.clone();
    match tokio::task::spawn_blocking(move || committing.commit()).await {
        Ok(committed) => committed.map_err(|err| error(file, err)),
        Err(join) => Err(error(
            file,
            CheckpointError::Io {
                op: "commit",
                path: PathBuf::from(file.to_string()),
                source: std::io::Error::other(join.to_string()),
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use corral_checkpoint::{CheckpointStore, DRA_MANAGER_FILE};

    use super::*;

    // Through a journaled store a staged write is durable once `make_durable` returns (the
    // manager's write-ahead record of a claim must be before a driver call).
    #[tokio::test]
    async fn through_a_journal_a_staged_write_is_durable_after_make_durable() {
        use corral_checkpoint::{Journal, JournalOptions, Managed};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DRA_MANAGER_FILE);
        let open = || {
            Journal::open(
                dir.path(),
                "journal",
                &[Managed::File(DRA_MANAGER_FILE.into())],
                JournalOptions::default(),
            )
            .unwrap()
        };
        let journal = Arc::new(open().0);
        let store = CheckpointStore::open(dir.path())
            .unwrap()
            .with_journal(Arc::clone(&journal));
        let file = StateFile::in_store(&store, DRA_MANAGER_FILE).unwrap();
        load_or_create(&file).unwrap();
        journal.activate().unwrap();
        let claim = DraManagerCheckpoint {
            claim_info_state_list: Some(vec![Default::default()]),
        };
        stage(&file, &claim).unwrap();
        assert!(journal.has_pending());
        make_durable(&file).await.unwrap();
        assert!(!journal.has_pending());
        let written = std::fs::read(&path).unwrap();
        drop((file, store, journal));
        std::fs::remove_file(&path).unwrap();
        let (_journal, recovery) = open();
        assert_eq!(recovery.restored, std::slice::from_ref(&path));
        assert_eq!(std::fs::read(&path).unwrap(), written);
    }

    // Upstream TestCheckpointGetOrCreate: a missing file is created empty; a corrupt one is
    // an error.
    #[test]
    fn get_or_create_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path()).unwrap();
        let file = StateFile::in_store(&store, DRA_MANAGER_FILE).unwrap();
        let path = file.path().unwrap();
        let empty = load_or_create(&file).unwrap();
        assert_eq!(empty.claim_info_state_list, Some(vec![]));
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(br#"{"Data":"{\"kind\":\"DRACheckpoint\""#));
        let mut corrupt = bytes.clone();
        let at = corrupt.len() - 2;
        corrupt[at] = if corrupt[at] == b'1' { b'2' } else { b'1' };
        std::fs::write(&path, corrupt).unwrap();
        let err = load_or_create(&file).unwrap_err();
        assert!(
            matches!(err, DraManagerError::Checkpoint { ref source, .. } if source.is_checksum_mismatch())
        );
    }
}

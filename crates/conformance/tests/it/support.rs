//! Where the vector files are.

use std::path::PathBuf;

/// The workspace's `testdata/conformance`, or the directory `CORRAL_CONFORMANCE_DIR` names
/// (to run another set of vector files of the same schema).
pub(crate) fn vectors_dir() -> PathBuf {
    std::env::var_os("CORRAL_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance")
        })
}

//! [`ConformanceError`]: why vector files could not be run at all.

use std::path::PathBuf;

/// Why a directory or file of vectors could not be run (a case that fails is not an error:
/// it is a [`Report`](crate::Report) entry).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConformanceError {
    /// The directory could not be listed.
    #[error("reading conformance directory {}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds no `*.json` file.
    #[error("no *.json vector files in {}", dir.display())]
    NoVectorFiles {
        /// The directory.
        dir: PathBuf,
    },
    /// A vector file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A vector file is not JSON.
    #[error("parsing {}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A vector file without a string `suite` field.
    #[error("{}: no string `suite` field", path.display())]
    NoSuite {
        /// The file.
        path: PathBuf,
    },
    /// A vector file of a suite corral does not know.
    #[error("{}: unknown suite `{suite}`", path.display())]
    UnknownSuite {
        /// The file.
        path: PathBuf,
        /// Its `suite`.
        suite: String,
    },
}

//! The Python virtualenv the foreign-peer interop tests run in: set up by corral-testkit's
//! [`ensure_python_env`](corral_testkit::ensure_python_env), the same code plain `cargo test`
//! runs, so `cargo xtask test` and `cargo test` agree on it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The interpreter to run the peer with (see [`corral_testkit::ensure_python_env`]).
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    corral_testkit::ensure_python_env(root).context("setting up the Python interop peer")
}

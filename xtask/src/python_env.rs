//! The Python virtualenv the foreign-peer interop tests run in (`.venv`, from
//! `python/requirements.txt`, pinned). Created or refreshed when the requirements change.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Where the requirements the venv was built from are recorded.
const STAMP: &str = ".corral-requirements";

/// The interpreter to run the peer with: `$CORRAL_PYTHON` when set, else `.venv/bin/python`,
/// creating or refreshing `.venv` first when needed.
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    if let Some(python) = std::env::var_os("CORRAL_PYTHON") {
        return Ok(PathBuf::from(python));
    }
    let venv = root.join(".venv");
    let python = venv.join("bin/python");
    let requirements_path = root.join("python/requirements.txt");
    let requirements = std::fs::read_to_string(&requirements_path)
        .with_context(|| format!("reading {}", requirements_path.display()))?;
    let stamp = venv.join(STAMP);
    if python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&requirements) {
        return Ok(python);
    }
    eprintln!(
        "xtask: setting up {} from {}",
        venv.display(),
        requirements_path.display()
    );
    let bootstrap = std::env::var("CORRAL_BOOTSTRAP_PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&bootstrap).args(["-m", "venv"]).arg(&venv)).with_context(|| {
        format!("creating a virtualenv with `{bootstrap} -m venv` (on Debian: apt-get install python3-venv)")
    })?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements_path))
    .context("installing the Python interop peer's requirements from PyPI")?;
    std::fs::write(&stamp, requirements)?;
    Ok(python)
}

fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

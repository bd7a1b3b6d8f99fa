//! The Python virtualenv the foreign-peer interop tests run in: `<workspace>/.venv`, built
//! from the pinned `python/requirements.txt` and rebuilt when the requirements change. Both
//! `cargo xtask test` and plain `cargo test` (through [`PythonPeer::locate`]) use this one
//! function, so a fresh clone's first `cargo test` sets the peer up by itself. Concurrent
//! test processes wait for one another on a lock file beside the venv.
//!
//! [`PythonPeer::locate`]: crate::PythonPeer::locate

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the requirements the venv was built from are recorded.
const STAMP: &str = ".corral-requirements";

/// Why the interop peer's Python could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum PythonEnvError {
    /// A file could not be read or written.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done, e.g. `reading`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A set-up command failed (or could not be started).
    #[error("`{command}` failed ({status}){remedy}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status, or why it did not run.
        status: String,
        /// What to do about it.
        remedy: &'static str,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PythonEnvError {
    let path = path.to_path_buf();
    move |source| PythonEnvError::Io {
        action,
        path,
        source,
    }
}

/// The interpreter to run the peer with: `$CORRAL_PYTHON` when set, else
/// `<root>/.venv/bin/python`, creating or refreshing `.venv` from PyPI first when needed
/// (`$CORRAL_BOOTSTRAP_PYTHON`, default `python3`, creates it).
pub fn ensure_python_env(root: &Path) -> Result<PathBuf, PythonEnvError> {
    if let Some(python) = std::env::var_os("CORRAL_PYTHON") {
        return Ok(PathBuf::from(python));
    }
    let venv = root.join(".venv");
    let python = venv.join("bin/python");
    let requirements_path = root.join("python/requirements.txt");
    let requirements =
        std::fs::read_to_string(&requirements_path).map_err(io("reading", &requirements_path))?;
    let stamp = venv.join(STAMP);
    let current = || {
        python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&requirements)
    };
    if current() {
        return Ok(python);
    }
    // One process builds the venv; the others wait here, then find it current.
    let lock_path = root.join(".venv.lock");
    let lock = std::fs::File::create(&lock_path).map_err(io("creating", &lock_path))?;
    lock.lock().map_err(io("locking", &lock_path))?;
    if current() {
        return Ok(python);
    }
    eprintln!(
        "corral-testkit: setting up {} from {} (PyPI)",
        venv.display(),
        requirements_path.display()
    );
    let bootstrap = std::env::var("CORRAL_BOOTSTRAP_PYTHON").unwrap_or_else(|_| "python3".into());
    run(
        Command::new(&bootstrap)
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
        " (on Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements_path),
        " (the interop peer's pinned requirements come from PyPI)",
    )?;
    std::fs::write(&stamp, requirements).map_err(io("writing", &stamp))?;
    Ok(python)
}

fn run(command: &mut Command, remedy: &'static str) -> Result<(), PythonEnvError> {
    let line = format!("{command:?}");
    let failed = |status: String| PythonEnvError::Command {
        command: line,
        status,
        remedy,
    };
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(failed(status.to_string())),
        Err(err) => Err(failed(err.to_string())),
    }
}

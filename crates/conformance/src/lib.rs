//! `corral-conformance`: checks corral against conformance vectors — JSON files produced by
//! running upstream Kubernetes' own Go code (kubelet `pkg/kubelet/cm/...`,
//! `k8s.io/utils/cpuset`, go-spew) on generated inputs. The schema is described in
//! `testdata/conformance/README.md`.
//!
//! Every vector file has a top-level `suite`; [`run_dir`] runs every `*.json` file of a
//! directory, [`run_file`] one file, each dispatching on `suite` to one suite module:
//!
//! | suite | checks |
//! |---|---|
//! | `cpuset` | `CpuSet` parse/print and set operations (`k8s.io/utils/cpuset`) |
//! | `bitmask` | `NumaMask` (topology manager `bitmask`), incl. `IterateBitMasks` order |
//! | `topology_merge` | `Policy::merge` for every policy, with and without prefer-closest |
//! | `cpu_assignment` | the CPU manager's packed and distributed assignment |
//! | `cpu_hints` | the static policy's `generateCPUTopologyHints` |
//! | `device_hints` | the device manager's hints, affinity filtering and device choice |
//! | `checkpoint` | every kubelet checkpoint format, byte for byte, and its readers' verdicts |
//!
//! A case that does not match records a failure line naming the file, the case and expected
//! vs. actual; the [`Report`] counts them per suite. `cargo xtask conformance [DIR]` prints
//! [`Report::render`], and this crate's own tests run every vector under `cargo test`.
//!
//! ```
//! let dir = tempfile::tempdir()?;
//! std::fs::write(
//!     dir.path().join("cpuset.json"),
//!     r#"{"suite": "cpuset", "parse_cases": [
//!         {"input": "0-2,7", "error": null, "list": [0, 1, 2, 7], "string": "0-2,7"},
//!         {"input": "3-1", "error": "invalid range", "list": null, "string": null}]}"#,
//! )?;
//! let report = corral_conformance::run_dir(dir.path())?;
//! assert!(report.all_passed());
//! assert_eq!(report.render(), "cpuset: 2 passed, 0 failed\ntotal: 2 passed, 0 failed\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **Architecture Invariant:** a test-support library (never published, a dependency of
//! `xtask` and of nothing in the product): it reads vector files and calls the managers'
//! public APIs only, never changes what it checks to fit corral, and a vector that cannot be
//! read is an error, never a pass.

mod error;
mod mismatch;
mod report;
mod suites;

use std::path::Path;

pub use error::ConformanceError;
pub use report::{Report, SuiteOutcome};

/// Run every `*.json` vector file in `dir`, in file name order.
///
/// Errors when the directory cannot be read, holds no `*.json` file, or a file cannot be
/// read, is not JSON or names no known `suite`; failed cases are not errors but
/// [`Report`] entries.
pub fn run_dir(dir: &Path) -> Result<Report, ConformanceError> {
    let read_dir = |source| ConformanceError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(read_dir)?
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(read_dir)?
        .into_iter()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(ConformanceError::NoVectorFiles {
            dir: dir.to_path_buf(),
        });
    }
    let mut report = Report::default();
    for path in paths {
        run_file_into(&path, &mut report)?;
    }
    Ok(report)
}

/// Run one vector file.
///
/// Errors as [`run_dir`] does for each of its files.
pub fn run_file(path: &Path) -> Result<Report, ConformanceError> {
    let mut report = Report::default();
    run_file_into(path, &mut report)?;
    Ok(report)
}

fn run_file_into(path: &Path, report: &mut Report) -> Result<(), ConformanceError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConformanceError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| ConformanceError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    let suite =
        doc.get("suite")
            .and_then(|s| s.as_str())
            .ok_or_else(|| ConformanceError::NoSuite {
                path: path.to_path_buf(),
            })?;
    let Some(runner) = suites::runner_for(suite) else {
        return Err(ConformanceError::UnknownSuite {
            path: path.to_path_buf(),
            suite: suite.to_owned(),
        });
    };
    let outcome = report.suite_mut(suite);
    outcome.start_file(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    runner(&doc, outcome);
    Ok(())
}

//! The conformance runner: reads vector files produced by upstream Go code and checks corral
//! against them, one suite module per `suite` value.
//!
//! Each suite module exposes `run(doc: &serde_json::Value, out: &mut SuiteOutcome)`: it
//! records a pass or a named failure (file, case, expected vs actual) per case.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

mod bitmask;
mod checkpoint;
mod cpu_assignment;
mod cpu_hints;
mod cpuset;
mod device_hints;
mod topology_merge;

/// Outcome of one suite over one or more files.
#[derive(Debug, Default)]
pub(crate) struct SuiteOutcome {
    pub(crate) passed: usize,
    pub(crate) failures: Vec<String>,
    file: String,
}

impl SuiteOutcome {
    /// Record one case: `Ok(())` passes, `Err(why)` fails with the case label and reason.
    pub(crate) fn check(&mut self, case: impl std::fmt::Display, result: Result<(), String>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(why) => self
                .failures
                .push(format!("{}: case {case}: {why}", self.file)),
        }
    }
}

/// What a whole run found, per suite.
#[derive(Debug, Default)]
pub(crate) struct Report {
    suites: BTreeMap<String, SuiteOutcome>,
}

impl Report {
    /// True when at least one case ran and none failed.
    pub(crate) fn all_passed(&self) -> bool {
        let passed: usize = self.suites.values().map(|s| s.passed).sum();
        passed > 0 && self.suites.values().all(|s| s.failures.is_empty())
    }

    /// Human-readable summary: failure lines, then `N passed, M failed` per suite and total.
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        let (mut passed, mut failed) = (0, 0);
        for (name, suite) in &self.suites {
            for failure in &suite.failures {
                let _ = writeln!(text, "FAIL [{name}] {failure}");
            }
            let _ = writeln!(
                text,
                "{name}: {} passed, {} failed",
                suite.passed,
                suite.failures.len()
            );
            passed += suite.passed;
            failed += suite.failures.len();
        }
        let _ = writeln!(text, "total: {passed} passed, {failed} failed");
        text
    }
}

/// Run every `*.json` file in `dir` (sorted by name).
pub(crate) fn run_dir(dir: &Path) -> Result<Report> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading conformance directory {}", dir.display()))?
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("listing {}", dir.display()))?
        .into_iter()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!("no *.json vector files in {}", dir.display());
    }
    let mut report = Report::default();
    for path in paths {
        run_file(&path, &mut report)?;
    }
    Ok(report)
}

fn run_file(path: &Path, report: &mut Report) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let suite = doc
        .get("suite")
        .and_then(|s| s.as_str())
        .with_context(|| format!("{}: no string `suite` field", path.display()))?
        .to_owned();
    let Some(runner) = runner_for(&suite) else {
        bail!("{}: unknown suite `{suite}`", path.display());
    };
    let outcome = report.suites.entry(suite).or_default();
    outcome.file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    runner(&doc, outcome);
    Ok(())
}

/// A suite's runner: checks every case of one vector file.
type SuiteRunner = fn(&serde_json::Value, &mut SuiteOutcome);

/// The runner for a `suite` value, or `None` for a suite corral does not know.
fn runner_for(suite: &str) -> Option<SuiteRunner> {
    match suite {
        // Suites register here as their crates implement them.
        "cpuset" => Some(cpuset::run),
        "device_hints" => Some(device_hints::run),
        "bitmask" => Some(bitmask::run),
        "checkpoint" => Some(checkpoint::run),
        "cpu_assignment" => Some(cpu_assignment::run),
        "cpu_hints" => Some(cpu_hints::run),
        "topology_merge" => Some(topology_merge::run),
        _ => None,
    }
}

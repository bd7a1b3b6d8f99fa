//! What a run found: per suite, the cases that passed and a line per failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::mismatch::Mismatch;

/// Outcome of one suite over one or more vector files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SuiteOutcome {
    passed: usize,
    failures: Vec<String>,
    /// The file whose cases are being checked (named in failure lines).
    file: String,
}

impl SuiteOutcome {
    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.passed
    }

    /// One line per failed case: `<file>: case <case>: <expected vs actual>`.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// Record one case: `Ok(())` passes, `Err(why)` fails with the file, the case label and
    /// the reason.
    pub(crate) fn check(&mut self, case: impl std::fmt::Display, result: Result<(), Mismatch>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(why) => self
                .failures
                .push(format!("{}: case {case}: {why}", self.file)),
        }
    }

    /// Name the file the next cases come from.
    pub(crate) fn start_file(&mut self, file: String) {
        self.file = file;
    }
}

/// What a whole run found, per suite (in suite name order).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    suites: BTreeMap<String, SuiteOutcome>,
}

impl Report {
    /// True when at least one case ran and none failed.
    pub fn all_passed(&self) -> bool {
        self.passed() > 0 && self.failed() == 0
    }

    /// Cases passed, over every suite.
    pub fn passed(&self) -> usize {
        self.suites.values().map(|s| s.passed).sum()
    }

    /// Cases failed, over every suite.
    pub fn failed(&self) -> usize {
        self.suites.values().map(|s| s.failures.len()).sum()
    }

    /// The outcome of suite `name`, if a file of that suite ran.
    pub fn suite(&self, name: &str) -> Option<&SuiteOutcome> {
        self.suites.get(name)
    }

    /// Every suite that ran, by name.
    pub fn suites(&self) -> impl Iterator<Item = (&str, &SuiteOutcome)> {
        self.suites.iter().map(|(name, s)| (name.as_str(), s))
    }

    /// Every failure line, prefixed `[suite]`, in suite order.
    pub fn failures(&self) -> impl Iterator<Item = String> + '_ {
        self.suites().flat_map(|(name, suite)| {
            suite
                .failures
                .iter()
                .map(move |failure| format!("[{name}] {failure}"))
        })
    }

    /// Human-readable summary: per suite its `FAIL [suite] …` lines, then
    /// `<suite>: N passed, M failed`; last `total: N passed, M failed`.
    pub fn render(&self) -> String {
        let mut text = String::new();
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
        }
        let _ = writeln!(
            text,
            "total: {} passed, {} failed",
            self.passed(),
            self.failed()
        );
        text
    }

    /// The outcome to record the cases of one more file of `suite` in.
    pub(crate) fn suite_mut(&mut self, suite: &str) -> &mut SuiteOutcome {
        self.suites.entry(suite.to_owned()).or_default()
    }
}

//! `cargo xtask test [ARGS…]`: the project's test command. Sets up the Python interop peer,
//! runs `cargo test --workspace ARGS…` (unit, integration and doc tests), and closes with one
//! line summing every test binary's result: `tests: N passed, M failed`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::{containerd_bundle, python_env};

/// Totals over every `test result:` line cargo printed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TestTotals {
    pub(crate) passed: u64,
    pub(crate) failed: u64,
}

impl TestTotals {
    /// Add the counts of one libtest `test result: ok. 3 passed; 0 failed; …` line.
    pub(crate) fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(['.', ';']) {
            let mut words = part.split_whitespace();
            if let (Some(count), Some(kind)) = (words.next(), words.next())
                && let Ok(count) = count.parse::<u64>()
            {
                match kind {
                    "passed" => self.passed += count,
                    "failed" => self.failed += count,
                    _ => {}
                }
            }
        }
    }

    /// The closing line.
    pub(crate) fn line(&self) -> String {
        format!("tests: {} passed, {} failed", self.passed, self.failed)
    }
}

/// Run the workspace's tests; returns the totals and whether cargo succeeded.
pub(crate) fn run(root: &Path, extra: &[String]) -> Result<(TestTotals, bool)> {
    let python = python_env::ensure(root)?;
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    match containerd_bundle::ensure(root) {
        Ok(bundle) => {
            command.env("CORRAL_CONTAINERD_BUNDLE", bundle);
        }
        Err(why) => {
            println!("containerd tests will skip: {why}");
            command.env("CORRAL_CONTAINERD_SKIP", why);
        }
    }
    let mut child = command
        .current_dir(root)
        .args(["test", "--workspace"])
        .args(extra)
        .env("CORRAL_PYTHON", &python)
        .stdout(Stdio::piped())
        .spawn()
        .context("running cargo test")?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    let mut totals = TestTotals::default();
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        totals.add_line(&line);
        writeln!(out, "{line}")?;
    }
    drop(out);
    let status = child.wait()?;
    println!("{}", totals.line());
    Ok((totals, status.success()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_libtest_result_lines() {
        let mut totals = TestTotals::default();
        totals.add_line("test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s");
        totals.add_line(
            "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out",
        );
        totals.add_line("running 5 tests");
        assert_eq!(
            totals,
            TestTotals {
                passed: 15,
                failed: 2
            }
        );
        assert_eq!(totals.line(), "tests: 15 passed, 2 failed");
    }
}

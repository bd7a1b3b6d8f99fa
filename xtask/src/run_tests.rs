//! `cargo xtask test [--stress] [ARGS…]`: the project's test command. Sets up the Python
//! interop peer, the containerd bundles (1.7 and 2.1) and the API server bundle, runs `cargo test --workspace
//! --no-fail-fast ARGS…` (unit, integration and doc tests: every test binary runs, whatever
//! fails before it), then names every failed test by its package and target and closes with
//! one line summing every binary's result: `tests: N passed, M failed`.
//!
//! `--stress` runs the same suite while busy loops (two per core by default, `--hogs N`)
//! keep every core overloaded, as on a shared CI runner or a laptop with a build going: the
//! suite must pass there too, so developers run it before they stop and CI runs it once.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};

use crate::{apiserver_bundle, containerd_bundle, python_env};

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

/// Every failure of a run, gathered from cargo's and libtest's output: the failed tests of
/// the binary being run, attributed to its target when cargo names it
/// (`error: test failed, to rerun pass `-p corral-x --test it``).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Failures {
    /// The failed tests of the binary running now, not yet attributed.
    pending: Vec<String>,
    /// `(target, test)`; a target whose binary failed without a failed test (it crashed or
    /// did not build) has the test `None`.
    pub(crate) failed: Vec<(String, Option<String>)>,
}

impl Failures {
    pub(crate) fn add_line(&mut self, line: &str) {
        if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.strip_suffix(" ... FAILED"))
        {
            self.pending.push(name.to_owned());
        } else if let Some(target) = line
            .strip_prefix("error: test failed, to rerun pass `")
            .or_else(|| line.strip_prefix("error: doctest failed, to rerun pass `"))
            .and_then(|rest| rest.strip_suffix('`'))
        {
            if self.pending.is_empty() {
                self.failed.push((target.to_owned(), None));
            }
            for test in self.pending.drain(..) {
                self.failed.push((target.to_owned(), Some(test)));
            }
        }
    }

    /// The listing that closes a run (empty when nothing failed).
    pub(crate) fn render(&self) -> String {
        let mut failed: Vec<String> = self
            .failed
            .iter()
            .map(|(target, test)| match test {
                Some(test) => format!("  {target}: {test}"),
                None => format!("  {target}: the test binary failed without a failed test"),
            })
            .collect();
        failed.extend(
            self.pending
                .iter()
                .map(|test| format!("  (target not named by cargo): {test}")),
        );
        if failed.is_empty() {
            return String::new();
        }
        format!("failed ({}):\n{}\n", failed.len(), failed.join("\n"))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.failed.is_empty() && self.pending.is_empty()
    }
}

/// How `cargo xtask test` runs.
#[derive(Debug, Default, Clone)]
pub(crate) struct TestOptions {
    /// Busy loops to run beside the suite (0: none).
    pub(crate) hogs: usize,
    /// Extra arguments for `cargo test`.
    pub(crate) extra: Vec<String>,
}

/// Two busy loops per core: the load under which the suite must still pass.
pub(crate) fn stress_hogs() -> usize {
    2 * std::thread::available_parallelism().map_or(2, usize::from)
}

/// Run the workspace's tests; returns the totals and whether every test binary passed.
pub(crate) fn run(root: &Path, options: &TestOptions) -> Result<(TestTotals, bool)> {
    let python = python_env::ensure(root)?;
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (release, bundle) in containerd_bundle::ensure_all(root) {
        let suffix = release.env_suffix();
        match bundle {
            Ok(dir) => {
                command.env(format!("CORRAL_CONTAINERD_BUNDLE_{suffix}"), dir);
            }
            Err(why) => {
                println!("containerd {} tests will skip: {why}", release.name());
                command.env(format!("CORRAL_CONTAINERD_SKIP_{suffix}"), why.to_string());
            }
        }
    }
    match apiserver_bundle::ensure(root) {
        Ok(dir) => {
            command.env("CORRAL_APISERVER_BUNDLE", dir);
        }
        Err(why) => {
            println!("API server tests will skip: {why:#}");
            command.env("CORRAL_APISERVER_SKIP", format!("{why:#}"));
        }
    }
    // cargo's lines (which target runs, which failed) and libtest's in the order written.
    let (reader, writer) = std::io::pipe().context("creating a pipe for cargo test")?;
    command
        .current_dir(root)
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(&options.extra)
        .env("CORRAL_PYTHON", &python)
        .stdout(writer.try_clone().context("cloning the pipe")?)
        .stderr(writer);
    let hogs = Hogs::start(options.hogs);
    let mut child = command.spawn().context("running cargo test")?;
    drop(command);
    let mut totals = TestTotals::default();
    let mut failures = Failures::default();
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(reader).lines() {
        let line = line?;
        totals.add_line(&line);
        failures.add_line(&line);
        writeln!(out, "{line}")?;
    }
    drop(out);
    let status = child.wait()?;
    drop(hogs);
    print!("{}", failures.render());
    println!("{}", totals.line());
    Ok((totals, status.success() && failures.is_empty()))
}

/// Busy loops on their own threads until dropped.
struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hogs {
    fn start(count: usize) -> Hogs {
        if count > 0 {
            println!("stress: {count} busy loops run beside the suite");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
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

    #[test]
    fn names_every_failed_test_with_its_target() {
        let mut failures = Failures::default();
        for line in [
            "     Running unittests src/lib.rs (target/debug/deps/corral_x-1)",
            "test a::ok ... ok",
            "test a::one ... FAILED",
            "test b::two ... FAILED",
            "failures:",
            "    a::one",
            "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out",
            "error: test failed, to rerun pass `-p corral-x --lib`",
            "     Running tests/it/main.rs (target/debug/deps/it-2)",
            "error: test failed, to rerun pass `-p corral-y --test it`",
            "     Running tests/it/main.rs (target/debug/deps/it-3)",
            "test c::three ... FAILED",
            "error: test failed, to rerun pass `-p corral-z --test it`",
            "test src/lib.rs - f (line 3) ... FAILED",
            "error: doctest failed, to rerun pass `-p corral-z --doc`",
            "error: 4 targets failed:",
        ] {
            failures.add_line(line);
        }
        assert_eq!(
            failures.render(),
            "failed (5):\n  -p corral-x --lib: a::one\n  -p corral-x --lib: b::two\n  \
             -p corral-y --test it: the test binary failed without a failed test\n  \
             -p corral-z --test it: c::three\n  -p corral-z --doc: src/lib.rs - f (line 3)\n"
        );
        assert!(Failures::default().render().is_empty());
    }
}

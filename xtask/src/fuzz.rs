//! `cargo xtask fuzz [--cases N] [--seed S] [FILTER]`: every parser of untrusted bytes under
//! its property fuzzer, exploring. The fuzz targets are the tests declared with
//! `corral_testkit::fuzz!` beside each parser (manifests, config, checkpoints, quantities,
//! cpusets, HPACK/`:authority`…). The ordinary test run (CI's) replays each target's saved
//! regression cases and 2,000 inputs from a fixed seed; this command builds them with the
//! `fuzz` profile (release optimisation, overflow checks and debug assertions on) and runs
//! each with `--cases` inputs (default 1,000,000) from a new seed (or `--seed`), printed
//! first so any run reproduces. A failing target saves its shrunk input under
//! `<crate>/fuzz-regressions/<target>/`, which every later test run replays: commit it with
//! the fix.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::run_tests::TestTotals;

/// The default number of generated inputs per target.
pub(crate) const DEFAULT_CASES: u32 = 1_000_000;

/// What one `cargo xtask fuzz` explores.
pub(crate) struct FuzzOptions<'a> {
    pub(crate) cases: u32,
    /// The seed; a new one when `None`.
    pub(crate) seed: Option<u64>,
    /// Only targets named `fuzz_<filter>…`.
    pub(crate) filter: Option<&'a str>,
}

/// Run every `fuzz_*` target (or those whose name also contains `filter`).
pub(crate) fn run(root: &Path, options: &FuzzOptions<'_>) -> Result<bool> {
    let started = std::time::Instant::now();
    let seed = options.seed.unwrap_or_else(new_seed);
    let cases = options.cases;
    let filter = options
        .filter
        .map_or_else(|| "fuzz_".to_owned(), |f| format!("fuzz_{f}"));
    println!(
        "fuzz: seed {seed}, {cases} inputs per target (again: cargo xtask fuzz --seed {seed} --cases {cases}{})",
        options.filter.map(|f| format!(" {f}")).unwrap_or_default()
    );
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(root)
        .args([
            "test",
            "--profile",
            "fuzz",
            "--workspace",
            "--exclude",
            "xtask",
            "--no-fail-fast",
            "--",
        ])
        .arg(&filter)
        .env(corral_testkit::FUZZ_CASES_VAR, cases.to_string())
        .env(corral_testkit::FUZZ_SEED_VAR, seed.to_string())
        .env(corral_testkit::FUZZ_SAVE_VAR, "1")
        .stdout(Stdio::piped());
    let mut child = command
        .spawn()
        .context("running cargo test --profile fuzz")?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    let mut totals = TestTotals::default();
    let mut out = std::io::stdout().lock();
    let mut in_failure = false;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        totals.add_line(&line);
        // Each test's verdict, and the failures' messages (seed, shrunk input, saved case).
        if line.starts_with("---- ") {
            in_failure = true;
        } else if line == "failures:" || line.starts_with("test result:") {
            in_failure = false;
        }
        if in_failure || line.starts_with("test ") && line.contains("fuzz_") {
            writeln!(out, "{line}")?;
        }
    }
    drop(out);
    let status = child.wait()?;
    println!(
        "fuzz: {} targets × {cases} generated inputs from seed {seed} in {:.0?}",
        totals.passed + totals.failed,
        started.elapsed()
    );
    println!("{}", totals.line());
    Ok(status.success() && totals.failed == 0 && totals.passed > 0)
}

/// A seed no earlier run is likely to have used: the clock's nanoseconds and the process id.
fn new_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

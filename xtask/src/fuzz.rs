//! `cargo xtask fuzz [--cases N] [FILTER]`: every parser of untrusted bytes under its
//! property fuzzer, for real. The fuzz targets are the proptest tests named `fuzz_*` beside
//! each parser (manifests, config, checkpoints, quantities, cpusets, HPACK/`:authority`…);
//! each takes its case count from `CORRAL_FUZZ_CASES` (2,000 in the ordinary test run,
//! which is CI's short run). This command builds them in release mode and runs each with
//! `--cases` (default 1,000,000) generated inputs; any panic fails it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::run_tests::TestTotals;

/// The default number of generated inputs per target.
pub(crate) const DEFAULT_CASES: u64 = 1_000_000;

/// Run every `fuzz_*` target (or those whose name also contains `filter`).
pub(crate) fn run(root: &Path, cases: u64, filter: Option<&str>) -> Result<bool> {
    let started = std::time::Instant::now();
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(root)
        .args([
            "test",
            "--release",
            "--workspace",
            "--exclude",
            "xtask",
            "--",
        ])
        .arg(filter.map_or_else(|| "fuzz_".to_owned(), |f| format!("fuzz_{f}")))
        .env("CORRAL_FUZZ_CASES", cases.to_string())
        .stdout(Stdio::piped());
    let mut child = command.spawn().context("running cargo test --release")?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    let mut totals = TestTotals::default();
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        totals.add_line(&line);
        if line.starts_with("test ") && line.contains("fuzz_") || line.contains("panicked") {
            writeln!(out, "{line}")?;
        }
    }
    drop(out);
    let status = child.wait()?;
    println!(
        "fuzz: {} targets × {cases} generated inputs in {:.0?}",
        totals.passed + totals.failed,
        started.elapsed()
    );
    println!("{}", totals.line());
    Ok(status.success() && totals.failed == 0 && totals.passed > 0)
}

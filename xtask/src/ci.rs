//! `cargo xtask ci`: everything `.ci/run` checks, in order, stopping at the first failure:
//! formatting, clippy (default and all features), generated code, the dependency rules of
//! the foundation crates, the test command, docs, the conformance vectors, and a benchmark
//! smoke run. Closes with the test totals line.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{bench, codegen, conformance, dependency_rules, run_tests};

pub(crate) fn run(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let step = |name: &str| println!("\n==> ci: {name}");

    step("cargo fmt --all --check");
    cargo_ok(root, &cargo, &["fmt", "--all", "--check"], &[])?;

    step("cargo clippy --workspace --all-targets -- -D warnings");
    cargo_ok(
        root,
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    step("cargo clippy --workspace --all-targets --all-features -- -D warnings");
    cargo_ok(
        root,
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;

    step("cargo xtask codegen --check");
    let stale = codegen::check(root)?;
    if !stale.is_empty() {
        bail!(
            "generated code is stale: {}; run `cargo xtask codegen`",
            stale.join(", ")
        );
    }

    step("dependency rules (foundation crates pull no tokio/tonic/prost)");
    let violations = dependency_rules::check(root)?;
    if !violations.is_empty() {
        bail!("dependency rules broken:\n{}", violations.join("\n"));
    }

    step("cargo xtask test (the README's test command)");
    let (totals, ok) = run_tests::run(root, &[])?;
    if !ok || totals.failed > 0 {
        bail!("tests failed: {}", totals.line());
    }

    step("cargo doc --workspace --no-deps (warnings are errors)");
    cargo_ok(
        root,
        &cargo,
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;

    step("cargo xtask conformance testdata/conformance");
    let report = conformance::run_dir(&root.join("testdata/conformance"))?;
    print!("{}", report.render());
    if !report.all_passed() {
        bail!("conformance vectors failed");
    }

    step("cargo xtask bench --quick (smoke run; timings never fail CI)");
    bench::run(
        root,
        &bench::BenchOptions {
            quick: true,
            json: None,
            filter: None,
        },
    )?;

    println!("\nci: every step passed");
    println!("{}", totals.line());
    Ok(())
}

fn cargo_ok(root: &Path, cargo: &str, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let mut command = Command::new(cargo);
    command.current_dir(root).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let status = command
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("`cargo {}` failed: {status}", args.join(" "));
    }
    Ok(())
}

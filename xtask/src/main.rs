//! `cargo xtask`: corral's project automation.
//!
//! - `cargo xtask codegen [--check]` regenerates (or checks) the committed protobuf code.
//! - `cargo xtask bench [--quick] [--json FILE] [FILTER]` runs the criterion benches and
//!   prints one summary table, with upstream Go's median beside benches named `go/<name>`.
//! - `cargo xtask test [--stress] [ARGS…]` is the test command (Python peer set-up +
//!   `cargo test --no-fail-fast`, every failed test named; `--stress` under busy loops).
//! - `cargo xtask ci` runs everything `.ci/run` checks.
//! - `cargo xtask containerd-bundle`, `cargo xtask apiserver-bundle` prepare the real
//!   programs the tests drive (containerd releases; etcd, a CRD API server and kubectl).
//! - `cargo xtask image [--binary PATH] [--output PATH]` writes corral's OCI image archive
//!   (`target/image/corral-oci.tar`), assembled offline from the release binary.
//! - `cargo xtask conformance DIR` runs every upstream conformance vector file in `DIR`.
//! - `cargo xtask fuzz [--cases N] [--seed S] [FILTER]` explores every parser's fuzz target
//!   with N inputs from a new seed, saving failures as regression cases.

mod apiserver_bundle;
mod bench;
mod ci;
mod codegen;
mod containerd_bundle;
mod debian;
mod dependency_rules;
mod fuzz;
mod image;
#[cfg(test)]
mod module_cycles;
mod python_env;
mod run_tests;
mod tidy;
#[cfg(test)]
mod tidy_limits;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "corral project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate Rust from proto/proto/*.proto into proto/src/gen/ (or check it is current).
    Codegen {
        /// Do not write; exit non-zero naming each stale file.
        #[arg(long)]
        check: bool,
    },
    /// The test command: set up the Python interop peer, run `cargo test --workspace
    /// --no-fail-fast`, name every failed test.
    Test {
        /// Run the suite while busy loops overload every core (two per core).
        #[arg(long)]
        stress: bool,
        /// How many busy loops `--stress` runs.
        #[arg(long, value_name = "N", requires = "stress")]
        hogs: Option<usize>,
        /// Extra arguments for `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Everything CI checks (what `.ci/run` runs).
    Ci,
    /// Run the workspace's criterion benches and print one summary table.
    Bench {
        /// A short smoke run (few samples); never fails on a timing.
        #[arg(long)]
        quick: bool,
        /// Also write the summary as JSON to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Only benchmarks whose id contains this.
        filter: Option<String>,
    },
    /// Run every parser's `fuzz_*` target with N new inputs (overflow checks on); failures
    /// are saved as regression cases.
    Fuzz {
        /// Generated inputs per target.
        #[arg(long, default_value_t = fuzz::DEFAULT_CASES)]
        cases: u32,
        /// The seed every target's inputs derive from (default: a new one, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Only targets named `fuzz_<FILTER>…`.
        filter: Option<String>,
    },
    /// Prepare the real containerd releases the NRI tests drive, 1.7 and 2.1
    /// (`target/containerd-bundle/<release>`; what `cargo xtask test` does first).
    ContainerdBundle,
    /// Prepare the real CRD API server, etcd and kubectl the NodeResourceTopology tests
    /// drive, from Debian sid (`target/apiserver-bundle`; what `cargo xtask test` does first).
    ApiserverBundle,
    /// Write corral's OCI image archive (no base image: the binary, the libraries `ldd`
    /// names, /etc/passwd and /etc/group, the state dir), from the release build by default.
    Image {
        /// Put this binary in the image instead of building the release one.
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
        /// Where to write the archive (default: target/image/corral-oci.tar).
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
        /// The image's name (default: docker.io/library/corral:dev, deploy/'s `corral:dev`).
        #[arg(long, value_name = "NAME")]
        reference: Option<String>,
    },
    /// Run every `*.json` conformance vector file in DIR, dispatching on its `suite` field.
    Conformance {
        /// Directory holding vector files (default: testdata/conformance).
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Codegen { check: false } => codegen::write(&workspace_root()).map(|()| true),
        Command::Codegen { check: true } => codegen::check(&workspace_root()).map(|problems| {
            for problem in &problems {
                eprintln!("{problem}; run `cargo xtask codegen`");
            }
            problems.is_empty()
        }),
        Command::Test { stress, hogs, args } => {
            let options = run_tests::TestOptions {
                hogs: if stress {
                    hogs.unwrap_or_else(run_tests::stress_hogs)
                } else {
                    0
                },
                extra: args,
            };
            run_tests::run(&workspace_root(), &options).map(|(totals, ok)| ok && totals.failed == 0)
        }
        Command::Ci => ci::run(&workspace_root()).map(|()| true),
        Command::Bench {
            quick,
            json,
            filter,
        } => bench::run(
            &workspace_root(),
            &bench::BenchOptions {
                quick,
                json,
                filter,
            },
        )
        .map(|()| true),
        Command::ContainerdBundle => {
            let mut all = true;
            for (release, bundle) in containerd_bundle::ensure_all(&workspace_root()) {
                match bundle {
                    Ok(dir) => println!("containerd {}: {}", release.name(), dir.display()),
                    Err(why) => {
                        eprintln!("cannot prepare containerd {}: {why}", release.name());
                        all = false;
                    }
                }
            }
            Ok(all)
        }
        Command::ApiserverBundle => match apiserver_bundle::ensure(&workspace_root()) {
            Ok(dir) => {
                println!("apiserver bundle: {}", dir.display());
                Ok(true)
            }
            Err(why) => {
                eprintln!("cannot prepare the apiserver bundle: {why:#}");
                Ok(false)
            }
        },
        Command::Fuzz {
            cases,
            seed,
            filter,
        } => fuzz::run(
            &workspace_root(),
            &fuzz::FuzzOptions {
                cases,
                seed,
                filter: filter.as_deref(),
            },
        ),
        Command::Image {
            binary,
            output,
            reference,
        } => {
            let options = image::ImageOptions {
                binary,
                output,
                reference,
            };
            image::run(&workspace_root(), &options).map(|(output, image)| {
                print!("{}", image::describe(&output, &image));
                true
            })
        }
        Command::Conformance { dir } => {
            let dir = dir.unwrap_or_else(|| workspace_root().join("testdata/conformance"));
            corral_conformance::run_dir(&dir)
                .map_err(anyhow::Error::from)
                .map(|report| {
                    print!("{}", report.render());
                    report.all_passed()
                })
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

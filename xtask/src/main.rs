//! `cargo xtask`: corral's project automation.
//!
//! - `cargo xtask conformance DIR` runs every upstream conformance vector file in `DIR`.

mod conformance;

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
    /// Run every `*.json` conformance vector file in DIR, dispatching on its `suite` field.
    Conformance {
        /// Directory holding vector files (default: testdata/conformance).
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Conformance { dir } => {
            let dir = dir.unwrap_or_else(|| workspace_root().join("testdata/conformance"));
            conformance::run_dir(&dir).map(|report| {
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

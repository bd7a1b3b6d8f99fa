//! One module per command; each turns parsed arguments into calls on the library crates and
//! prints the result.

mod admit;
mod checkpoint;
mod client;
mod config_check;
mod explain;
mod generate;
mod numa_nodes;
mod run;
mod status;
mod topology;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{CheckpointCommand, Command, ConfigCommand};

/// Print `doc` as JSON (pretty) or, with `yaml`, as YAML: the same document either way, as
/// kubectl's `-o json` and `-o yaml`. YAML is written by serde-saphyr's serializer (the
/// crate that reads corral's YAML), which quotes strings a YAML reader would take for
/// something else ("0", "true", "0-1").
pub(crate) fn print_document(doc: &serde_json::Value, yaml: bool) -> Result<()> {
    if yaml {
        let text = serde_saphyr::to_string(doc)?;
        crate::output::outln!("{}", text.trim_end_matches('\n'));
    } else {
        crate::output::outln!("{}", serde_json::to_string_pretty(doc)?);
    }
    Ok(())
}

/// Run a parsed command; the exit code is the command's verdict.
pub(crate) fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Topology { host_root, output } => topology::run(&host_root, output),
        Command::Run {
            config,
            demo_devices,
        } => run::run(&config, demo_devices),
        Command::Admit {
            files,
            output,
            target,
            dry_run,
        } => {
            let trial = if dry_run {
                admit::Trial::DryRun
            } else {
                admit::Trial::Real
            };
            admit::admit(&target, &files, output, trial)
        }
        Command::Release { pod, target } => client::release(&target, &pod),
        Command::Status {
            output,
            target,
            numa,
        } => {
            let view = if numa {
                status::StatusView::NumaNodes
            } else {
                status::StatusView::Pods
            };
            status::status(&target, output, view)
        }
        Command::Explain { files, output } => explain::run(&files, output),
        Command::Checkpoint(CheckpointCommand::Inspect { file, output }) => {
            checkpoint::inspect(&file, output)
        }
        Command::Checkpoint(CheckpointCommand::Verify { file }) => checkpoint::verify(&file),
        Command::Config {
            command: ConfigCommand::Check(args),
        } => config_check::run(&args),
        Command::Completions { shell } => generate::completions(shell),
        Command::Man { command } => generate::man(&command),
    }
}

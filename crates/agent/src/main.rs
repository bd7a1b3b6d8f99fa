//! `corral`: the node agent binary. Parses the command line, sets up logging and hands each
//! command to its module under `commands/`; it holds no resource-management logic itself.

mod cli;
mod commands;
mod config;
mod deploy_overlays;
mod deployment_files;
mod duration;
mod error_text;
mod exposition;
#[cfg(test)]
mod fuzz_tests;
mod kubelet_flags;
mod logging;
mod manifest;
mod node;
mod nrt;
mod output;
mod server;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse_args(std::env::args_os()).unwrap_or_else(|err| err.exit());
    if let Err(err) = logging::init(cli.log_format, cli.verbose, cli.klog_verbosity) {
        eprintln!("corral: {}", error_text::anyhow_chain(&err));
        return ExitCode::from(2);
    }
    match commands::run(cli.command) {
        Ok(code) => code,
        // The reader went away (`corral … | head -1`): nothing left to say. Only stdout:
        // a connection the agent closed is an error (below).
        Err(err) if output::is_stdout_closed(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("corral: {}", error_text::anyhow_chain(&err));
            ExitCode::FAILURE
        }
    }
}

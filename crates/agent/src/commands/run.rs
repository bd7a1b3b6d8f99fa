//! `corral run`: load and validate the configuration, then run the agent on a tokio runtime.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::ConfigArgs;
use crate::config;

pub(crate) fn run(args: &ConfigArgs, demo_devices: usize) -> Result<ExitCode> {
    let (config, unknown) = config::load(args)?;
    for key in unknown {
        tracing::warn!(key, "configuration key not read by corral");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(crate::server::run(config, demo_devices))?;
    Ok(ExitCode::SUCCESS)
}

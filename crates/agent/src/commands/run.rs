//! `corral run`: load and validate the configuration, then run the agent on a tokio runtime.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::ConfigArgs;
use crate::config;

pub(crate) fn run(args: &ConfigArgs, demo_devices: usize) -> Result<ExitCode> {
    let (config, unknown) = config::load(args)?;
    for unknown in unknown {
        match unknown.suggestion {
            Some(known) => tracing::warn!(
                key = unknown.key,
                did_you_mean = known,
                "configuration key not read by corral"
            ),
            None => tracing::warn!(key = unknown.key, "configuration key not read by corral"),
        }
    }
    for gate in config.feature_gates.ignored() {
        tracing::warn!(gate, "feature gate not read by corral");
    }
    for warning in config.feature_gates.warnings() {
        tracing::warn!("{warning}");
    }
    // As the kubelet (Go raises it at start): the soft open-file limit up to the hard one,
    // so sockets, plugin connections and state files do not meet the default 1,024.
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open-file limit"),
        Err(err) => {
            tracing::warn!(err = %err, "cannot raise the open-file limit (RLIMIT_NOFILE)")
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(crate::server::run(config, demo_devices))?;
    Ok(ExitCode::SUCCESS)
}

//! Log set-up: `tracing` to stderr, text or JSON, filtered by `RUST_LOG` or `-v`.

use std::io::IsTerminal as _;

use anyhow::Result;
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Install the global subscriber.
pub(crate) fn init(format: LogFormat, verbose: u8) -> Result<()> {
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|err| anyhow::anyhow!("cannot set up logging: {err}"))
}

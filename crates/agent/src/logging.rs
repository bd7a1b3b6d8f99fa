//! Log set-up: `tracing` to stderr, as text or as the Kubernetes components' JSON lines,
//! filtered by `RUST_LOG`, corral's `-v`/`-vv` or the kubelet's `-v=N`.
//!
//! # Verbosity
//!
//! klog's `-v=N` (`--v=N`) shows every message of verbosity N or lower; corral's messages
//! have tracing levels, mapped to klog verbosities (the `v` of a JSON line) as follows:
//!
//! | tracing level  | klog `v`        | shown from |
//! |----------------|-----------------|------------|
//! | ERROR          | (none, an error)| always     |
//! | WARN, INFO     | 0               | `-v=0`     |
//! | DEBUG          | 2               | `-v=2`     |
//! | TRACE          | 4               | `-v=4`     |
//!
//! So `-v=0` and `-v=1` show INFO and above, `-v=2` and `-v=3` add DEBUG, `-v=4` and more
//! add TRACE. corral's own `-v` (DEBUG) and `-vv` (TRACE) keep working; with both spellings
//! the more verbose wins.
//!
//! The verbosity is corral's: it applies to corral's own crates (the targets `corral`, the
//! binary, and `corral_*`, its libraries). Its dependencies (the HTTP/2 and gRPC stack —
//! `h2`, `hyper`, `tower`, `tonic` —, `rustls`, `kube`, …) log WARN and ERROR only, at every
//! `-v`, as the kubelet's `-v` does not open up its libraries' internals. The filter is
//! [`default_filter`]'s, e.g. `warn,corral=trace` at `-v=4`.
//!
//! `RUST_LOG`, when set, replaces that filter entirely (`-v` is then ignored): it is the way
//! to see a dependency, e.g. `RUST_LOG=info,corral=trace,h2=trace`.
//!
//! # JSON lines
//!
//! `--logging-format=json` (or `--log-format json`) writes what the kubelet's
//! `--logging-format=json` writes (`k8s.io/component-base/logs/json`: zap through zapr);
//! see [`json`] for the keys and their order.

use std::io::IsTerminal as _;

use anyhow::Result;
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

mod json;

#[cfg(test)]
use json::klog_verbosity;
use json::{KubernetesJson, SpanFields};

/// The tracing level of corral's own messages for corral's `-v` count and the kubelet's
/// `-v=N` (see the module docs).
pub(crate) fn own_level(verbose: u8, klog_v: Option<u32>) -> &'static str {
    let from_count = match verbose {
        0 => 0,
        1 => 2,
        _ => 4,
    };
    match from_count.max(klog_v.unwrap_or(0)) {
        0..=1 => "info",
        2..=3 => "debug",
        _ => "trace",
    }
}

/// The filter used when `RUST_LOG` is unset: dependencies at WARN, corral's own crates at
/// [`own_level`]. The directive `corral` matches every target that starts with it: the
/// binary's (`corral::…`) and the libraries' (`corral_topology::…`, …).
pub(crate) fn default_filter(verbose: u8, klog_v: Option<u32>) -> String {
    format!("warn,corral={}", own_level(verbose, klog_v))
}

/// Whether `target` (a tracing target, the module path by default) is one of corral's own
/// crates rather than a dependency.
pub(crate) fn is_own_target(target: &str) -> bool {
    let krate = target.split("::").next().unwrap_or(target);
    krate == "corral" || krate.starts_with("corral_")
}

/// Install the global subscriber.
pub(crate) fn init(format: LogFormat, verbose: u8, klog_v: Option<u32>) -> Result<()> {
    let default = default_filter(verbose, klog_v);
    let filter = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default))?;
    let result = match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .fmt_fields(SpanFields)
            .event_format(KubernetesJson)
            .try_init(),
    };
    result.map_err(|err| anyhow::anyhow!("cannot set up logging: {err}"))
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    #[test]
    fn klog_verbosity_maps_to_levels() {
        let cases = [
            ((0, None), "info"),
            ((0, Some(0)), "info"),
            ((0, Some(1)), "info"),
            ((0, Some(2)), "debug"),
            ((0, Some(3)), "debug"),
            ((0, Some(4)), "trace"),
            ((0, Some(10)), "trace"),
            ((1, None), "debug"),
            ((2, None), "trace"),
            ((1, Some(4)), "trace"),
            ((2, Some(0)), "trace"),
        ];
        for ((count, v), want) in cases {
            assert_eq!(own_level(count, v), want, "-v x{count}, -v={v:?}");
            assert_eq!(default_filter(count, v), format!("warn,corral={want}"));
        }
        // A message's `v` is the lowest -v=N that shows it.
        for (level, v) in [(Level::INFO, 0), (Level::DEBUG, 2), (Level::TRACE, 4)] {
            let filter = own_level(0, Some(v));
            assert!(
                filter
                    .parse::<tracing::level_filters::LevelFilter>()
                    .unwrap()
                    >= level
            );
            assert_eq!(klog_verbosity(level), Some(v));
        }
        assert_eq!(klog_verbosity(Level::ERROR), None);
    }

    #[test]
    fn own_targets_are_corral_and_its_libraries() {
        for own in ["corral", "corral::server::nri", "corral_topology::scope"] {
            assert!(is_own_target(own), "{own}");
        }
        for dependency in [
            "h2::codec",
            "hyper",
            "tonic::transport",
            "corralx",
            "kube_runtime",
        ] {
            assert!(!is_own_target(dependency), "{dependency}");
        }
    }
}

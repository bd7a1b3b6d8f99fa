//! Every invalid value of a configuration, collected rather than stopping at the first:
//! each under the key (or flag) that holds it, with what would have been accepted, printed
//! all at once; and the small checks every key shares (durations, positive counts).

use std::collections::BTreeMap;
use std::time::Duration;

use super::parse_go_duration;

/// One invalid value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    /// The key (or flag) that holds it.
    pub(crate) key: String,
    /// The value as given.
    pub(crate) value: String,
    /// What would have been accepted.
    pub(crate) accepted: String,
}

/// Every invalid value of a configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConfigErrors(pub(crate) Vec<ConfigError>);

impl ConfigErrors {
    pub(super) fn one(key: &str, value: &str, accepted: &str) -> Self {
        let mut errors = Self::default();
        errors.push(key, value, accepted);
        errors
    }

    pub(super) fn push(&mut self, key: &str, value: &str, accepted: &str) {
        self.0.push(ConfigError {
            key: key.into(),
            value: value.into(),
            accepted: accepted.into(),
        });
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn duration(
        &mut self,
        key: &str,
        value: Option<&str>,
        default: Duration,
    ) -> Duration {
        match value {
            None => default,
            Some(text) => parse_go_duration(text).unwrap_or_else(|why| {
                self.push(
                    key,
                    text,
                    &format!("a duration like \"10s\" or \"1m30s\" ({why})"),
                );
                default
            }),
        }
    }

    pub(super) fn positive(&mut self, key: &str, value: Option<u64>, default: usize) -> usize {
        match value {
            None => default,
            Some(n) => match usize::try_from(n) {
                Ok(n) if n > 0 => n,
                _ => {
                    self.push(key, &n.to_string(), "a positive whole number");
                    default
                }
            },
        }
    }
}

/// Options as the kubelet's flag takes them: `name=value,name=value`.
pub(super) fn options_text(options: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "invalid configuration:")?;
        for error in &self.0 {
            writeln!(
                f,
                "  {}: {:?} is not valid; accepted: {}",
                error.key, error.value, error.accepted
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

//! The one configuration of every fuzz target (proptest tests named `fuzz_*` beside each
//! parser of untrusted bytes): `CORRAL_FUZZ_CASES` inputs each, 2,000 when unset (the
//! ordinary test run, CI's short run; `cargo xtask fuzz` sets 1,000,000), no regression
//! files written.

use proptest::test_runner::Config;

/// The environment variable that sets how many inputs each fuzz target runs.
pub const FUZZ_CASES_VAR: &str = "CORRAL_FUZZ_CASES";

/// The proptest configuration of a fuzz target.
///
/// ```
/// let config = corral_testkit::fuzz_config();
/// assert!(config.cases >= 1);
/// assert!(config.failure_persistence.is_none());
/// ```
pub fn fuzz_config() -> Config {
    Config {
        cases: std::env::var(FUZZ_CASES_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
        failure_persistence: None,
        ..Config::default()
    }
}

//! The fuzz targets: one proptest run per parser of untrusted bytes, declared with
//! [`fuzz!`](crate::fuzz!) beside each parser. Every target
//!
//! 1. replays its saved regression cases first — every file under
//!    `<crate>/fuzz-regressions/<target>/` — and fails while any of them fails;
//! 2. then runs [`FUZZ_CASES_VAR`] generated inputs (2,000 when unset: the ordinary test
//!    run, which is CI's run) from a **fixed seed**: [`FUZZ_SEED_VAR`], or
//!    [`DEFAULT_FUZZ_SEED`] when unset, so every run of the test suite tries the same
//!    inputs and a failure reproduces with the one command its message prints;
//! 3. on a failure, names the seed, the shrunk input and that command, and with
//!    [`FUZZ_SAVE_VAR`] set (`cargo xtask fuzz` sets it) writes the shrunk input as a new
//!    regression case, to be committed with its fix.
//!
//! Overflow checks and debug assertions are on wherever the targets run: the test profile,
//! and `cargo xtask fuzz`'s `fuzz` profile (release optimisation with both checks on).

use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, RngSeed, TestCaseError, TestCaseResult, TestError, TestRunner,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The environment variable that sets how many inputs each fuzz target generates.
pub const FUZZ_CASES_VAR: &str = "CORRAL_FUZZ_CASES";
/// The environment variable that sets the seed every fuzz target's inputs derive from.
pub const FUZZ_SEED_VAR: &str = "CORRAL_FUZZ_SEED";
/// When set (to anything but `0` or empty), a failing target saves its shrunk input as a
/// regression case.
pub const FUZZ_SAVE_VAR: &str = "CORRAL_FUZZ_SAVE";
/// The seed of the ordinary test run.
pub const DEFAULT_FUZZ_SEED: u64 = 27;
/// Generated inputs per target when [`FUZZ_CASES_VAR`] is unset.
pub const DEFAULT_FUZZ_CASES: u32 = 2000;
/// The directory, in each crate, holding its targets' regression cases.
pub const REGRESSIONS_DIR: &str = "fuzz-regressions";

/// Why a regression case file does not hold a target's input (the cause is part of the
/// message: a replay prints the message alone).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaseError {
    /// A text input's case that is not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(std::string::FromUtf8Error),
    /// A tuple input's case that is not its JSON.
    #[error("not the target's JSON: {0}")]
    NotJson(serde_json::Error),
}

/// A fuzz input as a regression case file: raw bytes for byte and text inputs, JSON for
/// tuples.
pub trait FuzzInput: Sized + Debug {
    /// The case file's content.
    fn to_case(&self) -> Vec<u8>;
    /// The input a case file holds.
    fn from_case(bytes: &[u8]) -> Result<Self, CaseError>;
    /// The input as a failure message shows it.
    fn describe(&self) -> String {
        format!("{self:?}")
    }
}

impl FuzzInput for Vec<u8> {
    fn to_case(&self) -> Vec<u8> {
        self.clone()
    }
    fn from_case(bytes: &[u8]) -> Result<Self, CaseError> {
        Ok(bytes.to_vec())
    }
    fn describe(&self) -> String {
        format!("b\"{}\"", self.escape_ascii())
    }
}

impl FuzzInput for String {
    fn to_case(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn from_case(bytes: &[u8]) -> Result<Self, CaseError> {
        String::from_utf8(bytes.to_vec()).map_err(CaseError::NotUtf8)
    }
}

macro_rules! json_tuple_input {
    ($($name:ident),+) => {
        impl<$($name: Serialize + DeserializeOwned + Debug),+> FuzzInput for ($($name,)+) {
            fn to_case(&self) -> Vec<u8> {
                serde_json::to_vec(self).expect("a tuple of plain values serializes")
            }
            fn from_case(bytes: &[u8]) -> Result<Self, CaseError> {
                serde_json::from_slice(bytes).map_err(CaseError::NotJson)
            }
        }
    };
}

json_tuple_input!(A, B);
json_tuple_input!(A, B, C);
json_tuple_input!(A, B, C, D);

/// One fuzz target: its crate, its name and where its regression cases live. Made by
/// [`fuzz!`](crate::fuzz!), which also names the test function after it.
#[derive(Debug, Clone)]
pub struct FuzzTarget {
    package: &'static str,
    name: &'static str,
    regressions: PathBuf,
}

impl FuzzTarget {
    /// The target `name` of the package `package` whose manifest is in `manifest_dir`.
    pub fn new(package: &'static str, manifest_dir: &'static str, name: &'static str) -> Self {
        FuzzTarget {
            package,
            name,
            regressions: Path::new(manifest_dir).join(REGRESSIONS_DIR).join(name),
        }
    }

    /// The directory of this target's regression cases.
    pub fn regressions_dir(&self) -> &Path {
        &self.regressions
    }

    /// Replay the regression cases, then run the generated inputs; panics naming every
    /// failing case, or the seed, the shrunk input and how to reproduce it.
    pub fn run<S>(&self, strategy: S, test: impl Fn(S::Value) -> TestCaseResult)
    where
        S: Strategy,
        S::Value: FuzzInput,
    {
        let failures = self.replay(&test);
        if !failures.is_empty() {
            panic!(
                "{} of {}'s regression cases fail:\n{}",
                failures.len(),
                self.name,
                failures.join("\n")
            );
        }
        let seed = fuzz_seed();
        let config = Config {
            cases: fuzz_cases(),
            rng_seed: RngSeed::Fixed(seed ^ fnv1a(self.name.as_bytes())),
            failure_persistence: None,
            ..Config::default()
        };
        let cases = config.cases;
        match TestRunner::new(config).run(&strategy, test) {
            Ok(()) => {}
            Err(TestError::Abort(why)) => panic!("{}: aborted: {why}", self.name),
            Err(TestError::Fail(why, input)) => {
                let saved = if save_failures() {
                    match self.save(&input.to_case()) {
                        Ok(path) => format!(
                            "\nsaved as {}: commit it with the fix; the test replays it",
                            path.display()
                        ),
                        Err(e) => format!("\nnot saved: {e}"),
                    }
                } else {
                    String::new()
                };
                panic!(
                    "{name}: fails on a generated input (seed {seed}, {cases} cases): {why}\n\
                     shrunk input: {input}{saved}\n\
                     reproduce: {seed_var}={seed} {cases_var}={cases} cargo test -p {package} {name}\n\
                     or save it as a regression case: cargo xtask fuzz --seed {seed} --cases {cases} {short}",
                    name = self.name,
                    input = truncated(&input.describe(), 4000),
                    seed_var = FUZZ_SEED_VAR,
                    cases_var = FUZZ_CASES_VAR,
                    package = self.package,
                    short = self.name.strip_prefix("fuzz_").unwrap_or(self.name),
                );
            }
        }
    }

    /// Run every saved case; the failures, one line each.
    fn replay<V: FuzzInput>(&self, test: &impl Fn(V) -> TestCaseResult) -> Vec<String> {
        let mut paths: Vec<PathBuf> = match std::fs::read_dir(&self.regressions) {
            Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => return vec![format!("{}: {e}", self.regressions.display())],
        };
        paths.sort();
        let mut failures = Vec::new();
        for path in paths {
            let outcome = std::fs::read(&path)
                .map_err(|e| format!("unreadable: {e}"))
                .and_then(|bytes| V::from_case(&bytes).map_err(|e| e.to_string()))
                .and_then(
                    |input| match catch_unwind(AssertUnwindSafe(|| test(input))) {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(TestCaseError::Fail(why))) => Err(format!("fails: {why}")),
                        Ok(Err(TestCaseError::Reject(why))) => Err(format!("rejected: {why}")),
                        Err(panic) => Err(format!("panics: {}", panic_message(&*panic))),
                    },
                );
            if let Err(why) = outcome {
                failures.push(format!("  {}: {why}", path.display()));
            }
        }
        failures
    }

    /// Write a case named after its content's hash; its path.
    fn save(&self, case: &[u8]) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.regressions)?;
        let path = self.regressions.join(format!("{:016x}.case", fnv1a(case)));
        std::fs::write(&path, case)?;
        Ok(path)
    }
}

/// Declares fuzz targets as proptest's `proptest!` declares tests: each
/// `fn fuzz_x(input in strategy, …) { body }` becomes a `#[test]` that runs
/// [`FuzzTarget::run`] (regression cases, then generated inputs from a fixed seed). The
/// body may use `?` and `prop_assert!`.
///
/// ```
/// use proptest::prelude::*;
///
/// corral_testkit::fuzz! {
///     /// Parsing never panics.
///     fn fuzz_parse_u8(text in ".{0,8}") {
///         let _ = text.parse::<u8>();
///     }
///     fn fuzz_pairs(bytes in proptest::collection::vec(any::<u8>(), 0..8), cut in 0usize..8) {
///         prop_assert!(bytes.get(cut..).is_some() || cut > bytes.len());
///     }
/// }
/// ```
#[macro_export]
macro_rules! fuzz {
    (@test $(#[$meta:meta])* $name:ident, $strategy:expr, $arg:pat, $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            $crate::FuzzTarget::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_MANIFEST_DIR"),
                stringify!($name),
            )
            .run($strategy, |$arg| -> $crate::TestCaseResult {
                $body;
                Ok(())
            });
        }
    };
    () => {};
    (
        $(#[$meta:meta])*
        fn $name:ident($arg:pat in $strategy:expr $(,)?) $body:block
        $($rest:tt)*
    ) => {
        $crate::fuzz!(@test $(#[$meta])* $name, $strategy, $arg, $body);
        $crate::fuzz! { $($rest)* }
    };
    (
        $(#[$meta:meta])*
        fn $name:ident($($arg:pat in $strategy:expr),+ $(,)?) $body:block
        $($rest:tt)*
    ) => {
        $crate::fuzz!(@test $(#[$meta])* $name, ($($strategy,)+), ($($arg,)+), $body);
        $crate::fuzz! { $($rest)* }
    };
}

/// [`FUZZ_CASES_VAR`], or [`DEFAULT_FUZZ_CASES`] when unset or empty.
pub fn fuzz_cases() -> u32 {
    env_number(FUZZ_CASES_VAR).unwrap_or(DEFAULT_FUZZ_CASES)
}

/// [`FUZZ_SEED_VAR`], or [`DEFAULT_FUZZ_SEED`] when unset or empty.
pub fn fuzz_seed() -> u64 {
    env_number(FUZZ_SEED_VAR).unwrap_or(DEFAULT_FUZZ_SEED)
}

/// The number `var` holds; `None` when unset or empty. Any other value panics: a mistyped
/// seed or count silently replaced by the default would run other inputs than the ones a
/// reproduce command names.
fn env_number<T: std::str::FromStr>(var: &str) -> Option<T>
where
    T::Err: std::fmt::Display,
{
    let value = std::env::var(var).ok().filter(|v| !v.is_empty())?;
    match value.parse() {
        Ok(n) => Some(n),
        Err(e) => panic!("{var}={value:?} is not a number of the kind it must be: {e}"),
    }
}

fn save_failures() -> bool {
    std::env::var(FUZZ_SAVE_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// FNV-1a, 64 bits: a stable per-target seed offset and case file names.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn truncated(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a non-text panic)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn target(dir: &Path, name: &'static str) -> FuzzTarget {
        FuzzTarget {
            package: "corral-testkit",
            name,
            regressions: dir.join(name),
        }
    }

    #[test]
    fn inputs_round_trip_as_cases() {
        let bytes = vec![0u8, 255, b'{'];
        assert_eq!(Vec::<u8>::from_case(&bytes.to_case()).unwrap(), bytes);
        let text = "é\n".to_owned();
        assert_eq!(String::from_case(&text.to_case()).unwrap(), text);
        let pair = (vec![1u8, 2], true);
        assert_eq!(<(Vec<u8>, bool)>::from_case(&pair.to_case()).unwrap(), pair);
        assert!(String::from_case(&[0xff]).is_err());
    }

    #[test]
    fn a_saved_case_fails_the_target_until_fixed() {
        let dir = tempfile_dir();
        let broken = target(dir.path(), "fuzz_broken");
        broken.save(b"9223372036854775807").unwrap();
        let fails = catch_unwind(AssertUnwindSafe(|| {
            broken.run(".{0,4}", |text: String| {
                let _ = text.parse::<i64>().map(|n| n + 1);
                Ok(())
            })
        }));
        let message = panic_message(&*fails.unwrap_err());
        assert!(
            message.contains("1 of fuzz_broken's regression cases fail"),
            "{message}"
        );
        assert!(message.contains(".case: panics:"), "{message}");
        // Fixed: the same case passes.
        broken.run(".{0,4}", |text: String| {
            let _ = text.parse::<i64>().map(|n| n.checked_add(1));
            Ok(())
        });
    }

    #[test]
    fn the_same_seed_tries_the_same_inputs() {
        let dir = tempfile_dir();
        let seen = |name| {
            let inputs = std::sync::Mutex::new(Vec::new());
            target(dir.path(), name).run((any::<u64>(), any::<bool>()), |n| {
                inputs.lock().unwrap().push(n);
                Ok(())
            });
            inputs.into_inner().unwrap()
        };
        assert_eq!(seen("fuzz_a"), seen("fuzz_a"));
        assert_ne!(seen("fuzz_a"), seen("fuzz_b"));
    }

    #[test]
    fn a_failure_names_its_seed_and_shrunk_input() {
        let dir = tempfile_dir();
        let fails = catch_unwind(AssertUnwindSafe(|| {
            target(dir.path(), "fuzz_big").run((0u32..1000, Just(0u8)), |(n, _)| {
                prop_assert!(n < 500);
                Ok(())
            })
        }));
        let message = panic_message(&*fails.unwrap_err());
        assert!(message.contains("shrunk input: (500, 0)"), "{message}");
        assert!(
            message.contains(&format!("seed {}", fuzz_seed())),
            "{message}"
        );
        assert!(
            message.contains("cargo test -p corral-testkit fuzz_big"),
            "{message}"
        );
    }

    fn tempfile_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }
}

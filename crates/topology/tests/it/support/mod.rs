//! Helpers shared by the test modules.

pub(crate) mod policy_cases;
pub(crate) mod recorder;

//! The integration tests of `corral-checkpoint`, one test binary: each module is a former
//! test file.

mod crash_consistency;
mod decode_agrees;
mod disk_full;
mod dump_order;
mod errors;
mod fuzz;
mod journal_promise;
mod properties;
mod store;
mod upstream_cases;
mod upstream_dra;
mod write_through;

//! corral-memmgr's integration tests: machine states through real `memory_manager_state`
//! bytes, and their restore check.

mod restore;

//! `corral-testkit`: the test-support crate, shared by every corral crate's tests and
//! benches (a dev-dependency only, never published; `xtask` also uses it).
//!
//! - [`PythonPeer`]: the foreign gRPC peer `python/corral_peer` (Python grpcio), run with a
//!   bounded wait ([`PEER_TIMEOUT`]); its venv is built on first use from the pinned
//!   `python/requirements.txt` by [`ensure_python_env`], the code `cargo xtask test` uses
//!   too. Real device plugins and DRA drivers are Go and Python programs, so corral's servers
//!   and clients are tested against a gRPC stack that is not tonic.
//! - [`fuzz!`]: declares the `fuzz_*` targets beside each parser of untrusted bytes
//!   ([`FuzzTarget`]: saved regression cases first, then [`FUZZ_CASES_VAR`] inputs from a
//!   fixed seed, [`FUZZ_SEED_VAR`]).
//! - [`ApiServer`]: a real Kubernetes CRD API server (etcd and `apiextensions-apiserver`
//!   from [`ApiServerBundle`], which `cargo xtask apiserver-bundle` prepares from Debian's
//!   packages) on loopback, with its CA and a `system:masters` client certificate; it can be
//!   stopped and restarted while etcd keeps the data.
//! - [`Tmpfs`]: a small tmpfs mounted for one test, to fill a disk (root only).
//! - [`oci_image`]: corral's OCI image, assembled from a binary and the libraries it loads
//!   (`cargo xtask image`, and the real-containerd test from the binary under test).
//! - [`object_keys_in_order`]: a JSON log line's keys in written order; [`repeated_keys`]:
//!   the keys a JSON line repeats (which `serde_json::Value` hides).
//! - Upstream fixtures as plain data: [`upstream_topologies`] (the CPU manager tests'
//!   machines), [`conformance_topology`] (loading `testdata/` files, their topologies and
//!   hint lists), [`merge_inputs`] (the hint-merge inputs of the Go vectors and benches) and
//!   [`large_machines`] (a GB200-like tray and a 64-node machine); [`adversarial`] (inputs
//!   on which the topology manager's exact searches are exponential, from fixed seeds).
//!
//! **Architecture Invariant:** a leaf — it depends on no corral crate (the dependency rules
//! in `xtask` check it), so every crate can use it without a cycle; fixtures are plain data
//! and each consumer builds its own types from them. Every wait is bounded.
//!
//! ```no_run
//! # async fn demo() {
//! let peer = corral_testkit::PythonPeer::locate().expect("a Python with grpcio");
//! let answer = peer
//!     .run(&["register", "--socket", "/tmp/kubelet.sock", "--authority", "raw"])
//!     .await
//!     .unwrap();
//! assert_eq!(answer["ok"], true);
//! # }
//! ```

mod apiserver;
mod fuzz;
mod json_lines;
mod peer;
mod python_env;
mod tmpfs;

pub mod adversarial;
pub mod conformance_topology;
pub mod large_machines;
pub mod merge_inputs;
pub mod oci_image;
pub mod upstream_topologies;

use std::path::{Path, PathBuf};

pub use apiserver::{
    APISERVER_READY_TIMEOUT, ApiServer, ApiServerBundle, ApiServerError, CRD_SERVED_TIMEOUT,
    NoBundle,
};
pub use fuzz::{
    CaseError, DEFAULT_FUZZ_CASES, DEFAULT_FUZZ_SEED, FUZZ_CASES_VAR, FUZZ_SAVE_VAR, FUZZ_SEED_VAR,
    FuzzInput, FuzzTarget, REGRESSIONS_DIR, fuzz_cases, fuzz_seed,
};
pub use json_lines::{object_keys_in_order, repeated_keys};
pub use peer::{PEER_TIMEOUT, PeerError, PythonPeer};
pub use proptest::test_runner::TestCaseResult;
pub use python_env::{PythonEnvError, ensure_python_env};
pub use tmpfs::{MountError, Tmpfs};

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit sits two levels below the workspace root")
        .to_path_buf()
}

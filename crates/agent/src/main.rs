//! `corral`: the node agent binary.
//!
//! The agent will compose the managers (topology, CPU, device, DRA), restore their
//! checkpoints, and serve the device-plugin registration socket, the DRA plugin registry, the
//! admission API and the podresources API. Until then it only reports its version.

fn main() {
    println!("corral {}", env!("CARGO_PKG_VERSION"));
}

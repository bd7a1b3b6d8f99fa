//! corral-proto's integration tests: the generated services over real unix sockets, the
//! foreign (Python grpcio) peer, connection limits, the bytes on the wire, and NRI (ttrpc
//! over its multiplexer) between corral's plugin and runtime ends and against raw frames.

mod connection_limits;
mod foreign_grpcio;
mod nri;
mod support;
mod uds_roundtrip;
mod wire_bytes;

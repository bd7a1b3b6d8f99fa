//! corral-proto's integration tests: the generated services over real unix sockets, the
//! foreign (Python grpcio) peer, connection limits and the bytes on the wire.

mod connection_limits;
mod foreign_grpcio;
mod support;
mod uds_roundtrip;
mod wire_bytes;

//! NRI over real unix sockets: corral's plugin end against corral's runtime end (a whole
//! registration, configuration, synchronization and event round trip), and the plugin end
//! against a raw trunk that sends what a misbehaving runtime could: messages split across
//! frames, oversized frames and messages, undecodable requests, unknown methods, and floods
//! and trickles against the multiplexer's memory bound (`queue_bound`, and `memory`, which
//! measures a plugin process's resident set under them).

mod fuzz;
mod launched;
mod memory;
mod queue_bound;
mod raw_trunk;
mod round_trip;
mod versions;
mod wire;

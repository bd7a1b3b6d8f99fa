//! Runs the device checkpoint checksum from the benches a few times, for instruction counts
//! under `valgrind --tool=callgrind` or `perf stat` (steadier than wall time on a shared
//! machine).
//!
//! `cargo run --release --example checksum_profile -- <entries> <iterations> [noalloc]`

use std::hint::black_box;

use fixtures::{AllocResp, device_checkpoint};

#[path = "../benches/fixtures/mod.rs"]
mod fixtures;

fn main() {
    let mut args = std::env::args().skip(1);
    let entries: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let iterations: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let alloc_resp = match args.next().as_deref() {
        Some("noalloc") => AllocResp::Empty,
        _ => AllocResp::Filled,
    };
    let cp = device_checkpoint(entries, alloc_resp);
    let dump_len = cp.hash_input().map(|d| d.len()).unwrap_or(0);
    let mut sum = 0u64;
    let mut fastest = std::time::Duration::MAX;
    for _ in 0..iterations {
        let start = std::time::Instant::now();
        sum = sum.wrapping_add(black_box(&cp).checksum().unwrap_or(0));
        fastest = fastest.min(start.elapsed());
    }
    println!("entries={entries} dump_bytes={dump_len} checksum={sum} fastest={fastest:?}");
}

//! Runs the device checkpoint checksum from the benches a few times, for instruction counts
//! under `valgrind --tool=callgrind` or `perf stat` (steadier than wall time on a shared
//! machine).
//!
//! `cargo run --release --example checksum_profile -- <entries> <iterations> [noalloc]`

use std::collections::BTreeMap;
use std::hint::black_box;

use corral_checkpoint::{DeviceManagerCheckpoint, PodDevicesEntry};

fn main() {
    let mut args = std::env::args().skip(1);
    let entries: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let iterations: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let alloc_resp = args.next().as_deref() != Some("noalloc");
    let cp = DeviceManagerCheckpoint {
        pod_device_entries: Some(
            (0..entries)
                .map(|i| PodDevicesEntry {
                    pod_uid: format!("{:08x}-0000-4000-8000-{:012x}", i / 4, i),
                    container_name: format!("container-{}", i % 4),
                    resource_name: "nvidia.com/gpu".to_owned(),
                    device_ids: Some(BTreeMap::from([(
                        (i % 2) as i64,
                        Some(vec![format!("GPU-{i:06}-a"), format!("GPU-{i:06}-b")]),
                    )])),
                    alloc_resp: Some(if alloc_resp {
                        (0..32).map(|b| (b * 7 + i) as u8).collect()
                    } else {
                        Vec::new()
                    }),
                })
                .collect(),
        ),
        registered_devices: Some(
            (0..entries.min(64))
                .map(|r| {
                    (
                        format!("example.com/res{r}"),
                        Some((0..4).map(|d| format!("dev-{r}-{d}")).collect()),
                    )
                })
                .collect(),
        ),
    };
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

//! Checkpoint benchmarks: checksum (go-spew dump + FNV-32a), encode and decode of device
//! manager and CPU manager checkpoints with 1, 100 and 10 000 entries, and the latency of a
//! durable store write (temp file, fsync, rename, directory fsync).
//!
//! Goal: the checksum of a 10 000-entry device checkpoint under 2 ms. `device` entries carry
//! a 32-byte `AllocResp`, `device_noalloc` an empty one. `*/dump` (the materialised go-spew
//! text) and `*/fnv` (FNV-32a over it) are the two halves the checksum streams together:
//! FNV-32a is one dependent multiply per byte, so `*/fnv` bounds `*/checksum` from below.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use corral_checkpoint::{Checkpoint, CheckpointStore, CpuManagerCheckpoint, fnv32a};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fixtures::{AllocResp, device_checkpoint};

mod fixtures;

const SIZES: [usize; 3] = [1, 100, 10_000];

fn cpu_checkpoint(entries: usize) -> CpuManagerCheckpoint {
    let pods = (0..entries)
        .map(|i| {
            (
                format!("{:08x}-0000-4000-8000-{:012x}", i, i),
                Some(BTreeMap::from([(
                    format!("container-{}", i % 3),
                    format!("{}-{}", i % 64, i % 64 + 1),
                )])),
            )
        })
        .collect();
    CpuManagerCheckpoint {
        policy_name: "static".to_owned(),
        default_cpu_set: "0-3,64-67".to_owned(),
        entries: Some(pods),
    }
}

/// The benchmark group every checkpoint bench runs in.
type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn configure(c: &mut Criterion) -> Group<'_> {
    let mut group = c.benchmark_group("checkpoint");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    group
}

fn device_manager(c: &mut Criterion) {
    let mut group = configure(c);
    for (name, alloc_resp) in [
        ("device", AllocResp::Filled),
        ("device_noalloc", AllocResp::Empty),
    ] {
        for n in SIZES {
            let cp = device_checkpoint(n, alloc_resp);
            let file = cp.encode().expect("encode");
            let dump = cp.hash_input().expect("dump");
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/checksum"), n),
                &cp,
                |b, cp| b.iter(|| black_box(cp.checksum().expect("checksum"))),
            );
            group.bench_with_input(BenchmarkId::new(format!("{name}/dump"), n), &cp, |b, cp| {
                b.iter(|| black_box(cp.hash_input().expect("dump")))
            });
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/fnv"), n),
                &dump,
                |b, dump| b.iter(|| black_box(fnv32a(dump.as_bytes()))),
            );
            if alloc_resp == AllocResp::Filled {
                codec(&mut group, "device", n, &cp, &file);
            }
        }
    }
    group.finish();
}

/// `<kind>/encode` of `cp` and `<kind>/decode` of its `file`, at `n` entries.
fn codec<C: Checkpoint>(group: &mut Group<'_>, kind: &str, n: usize, cp: &C, file: &[u8]) {
    let encode = BenchmarkId::new(format!("{kind}/encode"), n);
    group.bench_with_input(encode, cp, |b, cp| {
        b.iter(|| black_box(cp.encode().expect("encode")))
    });
    let decode = BenchmarkId::new(format!("{kind}/decode"), n);
    group.bench_with_input(decode, file, |b, file| {
        b.iter(|| black_box(C::decode(file).expect("decode")))
    });
}

fn cpu_manager(c: &mut Criterion) {
    let mut group = configure(c);
    for n in SIZES {
        let cp = cpu_checkpoint(n);
        let file = cp.encode().expect("encode");
        group.bench_with_input(BenchmarkId::new("cpu/checksum", n), &cp, |b, cp| {
            b.iter(|| black_box(cp.checksum().expect("checksum")))
        });
        codec(&mut group, "cpu", n, &cp, &file);
    }
    group.finish();
}

fn durable_write(c: &mut Criterion) {
    let mut group = configure(c);
    let dir = tempfile::tempdir().expect("temp dir");
    let store = CheckpointStore::open(dir.path()).expect("store");
    let cp = cpu_checkpoint(100);
    group.bench_function("store/durable_write/cpu_100", |b| {
        b.iter(|| {
            store
                .create("cpu_manager_state", black_box(&cp))
                .expect("write")
        })
    });
    group.finish();
}

criterion_group!(benches, device_manager, cpu_manager, durable_write);
criterion_main!(benches);

//! One whole in-process admission, no I/O: the topology manager (best-effort, container
//! scope) asks the CPU manager's static policy and the device manager's state for hint
//! families, merges them, and each allocates (4 exclusive CPUs, then 1 GPU) — the
//! synchronous cores the agent wires, built by the large-machine tests' harness
//! (`tests/it/in_process.rs`, included here). Rows (ids under `admission/`, as
//! `testdata/bench/targets.json` names them):
//!
//! - `admission/256cpu-8numa/cpu+gpu`: 2 sockets × 4 nodes × 16 cores × 2 threads, a GPU
//!   per node;
//! - `admission/gb200-34numa/cpu+gpu` and `admission/synthetic64-64numa/cpu+gpu`:
//!   corral-testkit's large machines;
//! - the same with the memory manager's static policy as a third provider (`+memory`).
//!
//! Only `admit` is timed; the pod's CPUs, devices and memory are given back between
//! iterations outside the measurement, so every iteration admits into the same state.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corral_testkit::large_machines::{LargeMachine, gb200, synthetic64, two_socket_8numa};
use corral_topology::{PolicyName, ScopeName};
use criterion::{Criterion, criterion_group, criterion_main};

// The tests' harness; the bench reads less of it than the tests do.
#[allow(dead_code)]
#[path = "../tests/it/in_process.rs"]
mod in_process;
use in_process::{GI, Node, NodeConfig, Providers, guaranteed, holdings, node, release};

/// Check the pod got what it asked (4 CPUs, 1 GPU), then give it all back.
fn check_and_release(node: &Node, machine: &LargeMachine, pod: &corral_topology::Pod) {
    let (cpus, _, devices) = holdings(node, machine, pod);
    assert_eq!(cpus.len(), 4, "4 exclusive CPUs");
    assert_eq!(devices.len(), 1, "one GPU");
    release(node, pod);
}

fn admission(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    for (name, machine) in [
        ("256cpu-8numa", two_socket_8numa()),
        ("gb200-34numa", gb200()),
        ("synthetic64-64numa", synthetic64()),
    ] {
        for (providers, row) in [
            (Providers::CpusAndDevices, "cpu+gpu"),
            (Providers::CpusDevicesAndMemory, "cpu+gpu+memory"),
        ] {
            let config = NodeConfig {
                policy: PolicyName::BestEffort,
                scope: ScopeName::Container,
                prefer_closest_numa: false,
                providers,
            };
            let node = node(&machine, config);
            let pod = guaranteed("pod", machine.resource, 4, 4 * GI, 1);
            let id = format!("{name}/{row}");
            group.bench_function(id, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let started = Instant::now();
                        let result = node.manager.admit(black_box(&pod));
                        total += started.elapsed();
                        assert!(result.admit, "{result:?}");
                        check_and_release(&node, &machine, &pod);
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = admission);
criterion_main!(benches);

//! Device manager benchmarks: device selection (`devices_to_allocate`) with 8 to 4,096
//! devices across 1–8 NUMA nodes, with and without a NUMA affinity; container hint
//! generation; and the `Allocate` round trip over a unix socket (the bare RPC to the
//! sample plugin, and the manager's whole allocation including its checkpoint write).

use std::hint::black_box;
use std::time::{Duration, Instant};

use corral_devicemgr::sample::{SampleConfig, SamplePlugin};
use corral_devicemgr::{
    AllocationRequest, Device, DeviceManager, DeviceManagerConfig, DeviceState, PluginOptions,
    StartOptions, ToAllocate,
};
use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, device_plugin_client::DevicePluginClient,
};
use corral_topology::{Container, NumaMask, Pod};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const RESOURCE: &str = "example.com/dev";

fn state(devices: usize, numa: usize) -> DeviceState {
    let mut state = DeviceState::new((0..numa).collect());
    state.plugin_connected(RESOURCE, PluginOptions::default());
    let list: Vec<Device> = (0..devices)
        .map(|i| Device::new(format!("dev-{i:05}"), Some(vec![(i % numa) as i64])))
        .collect();
    state.update_devices(RESOURCE, &list);
    state
}

fn selection(c: &mut Criterion) {
    let mut group = c.benchmark_group("select");
    group.sample_size(30);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    for (devices, numa) in [(8, 1), (64, 2), (256, 4), (1024, 4), (4096, 8)] {
        for affinity in [false, true] {
            let base = state(devices, numa);
            let mask = affinity.then(|| NumaMask::new([numa - 1]).expect("mask"));
            let name = format!(
                "{devices}dev_{numa}numa_{}",
                if affinity { "affinity" } else { "no_affinity" }
            );
            group.bench_function(name, |b| {
                b.iter_batched(
                    || base.clone(),
                    |mut s| {
                        let request = AllocationRequest {
                            affinity: mask,
                            ..AllocationRequest::new("pod", "ctr", RESOURCE, 4)
                        };
                        let out = s.devices_to_allocate(&request, None).expect("allocates");
                        assert!(matches!(out, ToAllocate::Devices(_)));
                        // The state is dropped outside the measurement.
                        (s, black_box(out))
                    },
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

fn hints(c: &mut Criterion) {
    let mut group = c.benchmark_group("hints");
    group.sample_size(30);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    let mut ctr = Container::new("ctr");
    ctr.resources.limits.extended.insert(RESOURCE.to_owned(), 4);
    for (devices, numa) in [(8, 1), (256, 4), (4096, 8)] {
        let s = state(devices, numa);
        group.bench_function(format!("container_{devices}dev_{numa}numa"), |b| {
            b.iter(|| black_box(s.hints_for_container("pod", &ctr)));
        });
    }
    group.finish();
}

fn allocate_round_trip(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, plugin) = runtime.block_on(async {
        let mut config = DeviceManagerConfig::new(dir.path(), vec![0, 1]);
        config.registration_wait = Duration::ZERO;
        let manager = DeviceManager::new(config).expect("manager");
        manager.start(StartOptions::default()).await.expect("start");
        let sample = SampleConfig::new(RESOURCE, dir.path().join("dev.sock"), 64, &[0, 1]);
        let plugin = SamplePlugin::start(sample).await.expect("plugin");
        let kubelet_socket = manager.socket_path();
        plugin.register(&kubelet_socket).await.expect("register");
        assert!(
            manager
                .wait_for_plugin(RESOURCE, Duration::from_secs(10))
                .await
        );
        (manager, plugin)
    });
    let mut group = c.benchmark_group("allocate");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));

    let mut client = runtime.block_on(async {
        let channel = corral_proto::uds::connect(plugin.socket(), Duration::from_secs(5))
            .await
            .expect("dial");
        DevicePluginClient::new(channel)
    });
    group.bench_function("rpc_unix_socket", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let request = AllocateRequest {
                    container_requests: vec![ContainerAllocateRequest {
                        devices_ids: vec!["dev-0".into(), "dev-1".into()],
                    }],
                };
                black_box(client.allocate(request).await.expect("allocate"))
            })
        });
    });

    let mut ctr = Container::new("ctr");
    ctr.resources.limits.extended.insert(RESOURCE.to_owned(), 2);
    group.bench_function("manager_with_checkpoint", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let pod = Pod {
                    uid: format!("uid-{i}"),
                    containers: vec![ctr.clone()],
                    ..Pod::default()
                };
                let started = Instant::now();
                runtime
                    .block_on(manager.allocate(&pod, &ctr, None))
                    .expect("allocate");
                total += started.elapsed();
                manager.remove_pod(&pod.uid).expect("release");
            }
            total
        });
    });
    group.finish();
    runtime.block_on(async {
        plugin.stop().await;
        manager.stop().await;
    });
}

criterion_group!(benches, selection, hints, allocate_round_trip);
criterion_main!(benches);

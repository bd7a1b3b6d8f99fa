//! Registrations cannot exhaust the process's file descriptors: a re-registration of a
//! resource replaces its endpoint and closes the old connection, and the resources one
//! plugin (one endpoint socket) and all plugins together may register are capped, with an
//! error answer naming the cap.

use std::time::{Duration, Instant};

use crate::support::*;
use corral_devicemgr::DeviceManager;
use corral_devicemgr::sample::SamplePlugin;
use corral_proto::deviceplugin::v1beta1::{
    DevicePluginOptions, RegisterRequest, VERSION, registration_client::RegistrationClient,
};
use corral_proto::uds;

const REGISTRATIONS: usize = 1_005;

/// Held by every test of this file while it runs: one at a time, as when they all counted
/// this process's file descriptors (the two that count them now also run in a process of
/// their own, [`alone`], where no other test runs).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Set in the process [`alone`] starts.
const ALONE_VAR: &str = "CORRAL_DEVICEMGR_TEST_ALONE";

/// The tests that count the process's file descriptors run in a process of their own: the
/// other tests of this binary (sockets, plugins, temporary files) run in parallel threads of
/// this one, and their descriptors would count too. In the test run this starts this binary
/// again with only the test `name` of this file and waits for it (`true`: the caller returns,
/// the test ran there); in that process it is `false` and the caller runs the test.
fn alone(name: &str) -> bool {
    if std::env::var_os(ALONE_VAR).is_some() {
        return false;
    }
    let test = format!("registration_limits::{name}");
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE_VAR, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} in its own process: {}\n{stdout}\n{stderr}",
        output.status
    );
    true
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    assert!(
        std::env::var_os(ALONE_VAR).is_some(),
        "counted only in a process of its own (alone)"
    );
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Wait (bounded) until the open file descriptors are at most `bound`; the count then.
async fn fds_settle_to(bound: usize) -> usize {
    let deadline = Instant::now() + WAIT;
    loop {
        let fds = open_fds();
        if fds <= bound || Instant::now() >= deadline {
            return fds;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn register_request(resource: &str, endpoint: &str) -> RegisterRequest {
    RegisterRequest {
        version: VERSION.into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: Some(DevicePluginOptions::default()),
    }
}

async fn registration_client(
    manager: &DeviceManager,
) -> RegistrationClient<corral_proto::uds::Channel> {
    RegistrationClient::new(uds::connect(manager.socket_path(), WAIT).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_registrations_of_one_resource_do_not_accumulate_connections() {
    if tokio::task::block_in_place(|| {
        alone("repeated_registrations_of_one_resource_do_not_accumulate_connections")
    }) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let (dir, manager) = started(vec![0]).await;
    let plugin = plugin(
        &manager,
        sample(dir.path(), "example.com/gpu", "gpu", 2, &[0]),
    )
    .await;
    let mut client = registration_client(&manager).await;
    let before = open_fds();
    for _ in 0..REGISTRATIONS {
        tokio::time::timeout(
            WAIT,
            client.register(register_request("example.com/gpu", "gpu.sock")),
        )
        .await
        .expect("Register answers")
        .expect("a re-registration is accepted");
    }
    let after = fds_settle_to(before + 16).await;
    assert!(
        after <= before + 16,
        "{REGISTRATIONS} re-registrations: {before} open files before, {after} after"
    );
    assert!(manager.wait_for_plugin("example.com/gpu", WAIT).await);
    assert_eq!(manager.capacity().capacity["example.com/gpu"], 2);
    plugin.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plugin_registering_many_resources_is_capped() {
    if tokio::task::block_in_place(|| alone("one_plugin_registering_many_resources_is_capped")) {
        return;
    }
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), vec![0]);
    let per_plugin = cfg.max_resources_per_plugin;
    let manager = manager(cfg).await;
    let plugin = SamplePlugin::start(sample(dir.path(), "example.com/r0", "many", 1, &[0]))
        .await
        .unwrap();
    let mut client = registration_client(&manager).await;
    let before = open_fds();
    let mut refused = Vec::new();
    for i in 0..REGISTRATIONS {
        let resource = format!("example.com/r{i}");
        let answer = tokio::time::timeout(
            WAIT,
            client.register(register_request(&resource, "many.sock")),
        )
        .await
        .expect("Register answers");
        if let Err(status) = answer {
            refused.push((i, status));
        }
    }
    let after = fds_settle_to(before + 3 * per_plugin + 16).await;
    assert!(
        after <= before + 3 * per_plugin + 16,
        "{REGISTRATIONS} registrations from one plugin: {before} open files before, {after} after"
    );
    assert_eq!(refused.len(), REGISTRATIONS - per_plugin);
    assert_eq!(
        refused[0].0, per_plugin,
        "the first {per_plugin} are accepted"
    );
    let status = &refused[0].1;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("{per_plugin} resources"))
            && status.message().contains("max_resources_per_plugin")
            && status.message().contains("many.sock"),
        "{}",
        status.message()
    );
    // Re-registering an accepted resource still works at the cap.
    client
        .register(register_request("example.com/r0", "many.sock"))
        .await
        .unwrap();
    plugin.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_plugins_together_are_capped() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), vec![0]);
    cfg.max_resources = 3;
    let manager = manager(cfg).await;
    let mut plugins = Vec::new();
    for i in 0..4 {
        let resource = format!("example.com/d{i}");
        let plugin = SamplePlugin::start(sample(dir.path(), &resource, &format!("d{i}"), 1, &[0]))
            .await
            .unwrap();
        let answer = plugin.register(&manager.socket_path()).await;
        if i < 3 {
            answer.unwrap();
        } else {
            let status = answer.unwrap_err();
            assert_eq!(status.code(), tonic::Code::ResourceExhausted);
            assert!(
                status.message().contains("max_resources")
                    && status.message().contains("3 resources"),
                "{}",
                status.message()
            );
        }
        plugins.push(plugin);
    }
    // When a plugin goes away, its place is free again.
    let gone = plugins.remove(0);
    gone.stop().await;
    let deadline = Instant::now() + WAIT;
    loop {
        match plugins[2].register(&manager.socket_path()).await {
            Ok(()) => break,
            Err(status) if Instant::now() < deadline => {
                assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("the freed place was not given back: {status:?}"),
        }
    }
    for plugin in plugins {
        plugin.stop().await;
    }
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_registrations_count_while_they_are_dialed() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), vec![0]);
    let per_plugin = cfg.max_resources_per_plugin;
    let manager = manager(cfg).await;
    let plugin = SamplePlugin::start(sample(dir.path(), "example.com/c0", "conc", 1, &[0]))
        .await
        .unwrap();
    let client = registration_client(&manager).await;
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let mut client = client.clone();
            tokio::spawn(async move {
                let request = register_request(&format!("example.com/c{i}"), "conc.sock");
                tokio::time::timeout(WAIT, client.register(request)).await
            })
        })
        .collect();
    let mut accepted = 0;
    for call in calls {
        match call.await.unwrap().expect("Register answers") {
            Ok(_) => accepted += 1,
            Err(status) => assert_eq!(status.code(), tonic::Code::ResourceExhausted),
        }
    }
    assert_eq!(accepted, per_plugin);
    plugin.stop().await;
    manager.stop().await;
}

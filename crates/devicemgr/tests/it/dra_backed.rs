//! Upstream PR #141426 ("device-plugin: skip DRA resources in
//! GetDeviceRunContainerOptions"): an extended resource DRA satisfies (KEP-5004) may have
//! a name a device plugin served before; the device-plugin state kept under that name must
//! not turn into device-plugin handling (`PreStartContainer`, a re-allocation) or run
//! options for the container. [`DeviceManager::run_container_options_beside_dra`] takes the
//! container's DRA-backed resources; `run_container_options` keeps upstream's behaviour
//! without them, which these tests show is the hazard.

use std::collections::BTreeSet;

use corral_devicemgr::{DeviceManager, ResourceAllocations, RunContainerOptions};

use crate::support::*;

const GPU: &str = "example.com/gpu";
const NIC: &str = "example.com/nic";

fn dra_backed(resources: &[&str]) -> BTreeSet<String> {
    resources.iter().map(|r| (*r).to_owned()).collect()
}

async fn options_beside_dra(
    manager: &DeviceManager,
    pod: &corral_topology::Pod,
    dra: &[&str],
) -> Option<corral_devicemgr::RunContainerOptions> {
    manager
        .run_container_options_beside_dra(pod, &pod.containers[0], None, &dra_backed(dra))
        .await
        .unwrap()
}

/// The container's GPU was given by the GPU plugin (state the manager keeps, as restored
/// from a checkpoint); the pod's GPU is now DRA's. Without the DRA-backed set the stale
/// allocation gives device-plugin run options; with it, none, and the plugin is not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_device_plugin_state_of_a_dra_backed_resource_gives_no_run_options() {
    let (_dir, manager, plugin) = started_with_plugin(vec![0], GPU, 2, &[0]).await;
    let p = pod("uid-1", vec![], vec![container("app", &[(GPU, 1)])]);
    allocate_on(&manager, &p, &p.containers[0], 0).await;
    let legacy = run_options(&manager, &p, &p.containers[0]).await;
    assert_ne!(
        legacy,
        Default::default(),
        "the hazard: device-plugin options"
    );
    let calls = plugin.calls();

    assert_eq!(options_beside_dra(&manager, &p, &[GPU]).await, None);
    let after = plugin.calls();
    assert_eq!(after.allocate, calls.allocate, "no re-allocation");
    assert_eq!(after.pre_start, calls.pre_start, "no PreStartContainer");
}

/// A container whose GPU is DRA's and whose NIC is a device plugin's: its run options are
/// exactly those of its NIC allocation, not merged with the GPU's stale ones (the GPU's
/// come first in name order, so its `SAMPLE_DEVICES` would win).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_with_dra_and_device_plugin_resources_gets_the_plugins_options_only() {
    let (dir, manager) = started(vec![0]).await;
    let _gpu = plugin(&manager, sample(dir.path(), GPU, "gpu", 2, &[0])).await;
    let _nic = plugin(&manager, sample(dir.path(), NIC, "nic", 2, &[0])).await;
    let both = pod(
        "uid-1",
        vec![],
        vec![container("app", &[(GPU, 1), (NIC, 1)])],
    );
    allocate_on(&manager, &both, &both.containers[0], 0).await;
    let held = manager.container_devices("uid-1", "app");
    let nic: ResourceAllocations = held
        .iter()
        .filter(|(resource, _)| *resource == NIC)
        .map(|(r, a)| (r.clone(), a.clone()))
        .collect();
    let want = RunContainerOptions::merge(&nic);
    let legacy = run_options(&manager, &both, &both.containers[0]).await;
    assert_ne!(legacy, want, "the hazard: the GPU's options are merged in");

    let got = options_beside_dra(&manager, &both, &[GPU]).await;
    assert_eq!(got, Some(want));
}

/// The resource's only device is held by another pod and the pod's container has no
/// device-plugin state for it: asked without the DRA-backed set, the manager re-allocates
/// from the device plugin and fails (the container would not start, upstream's bug); with
/// it, no options, no error, no plugin call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dra_backed_resource_is_never_reallocated_from_its_device_plugin() {
    let (_dir, manager, plugin) = started_with_plugin(vec![0], GPU, 1, &[0]).await;
    let holder = pod("holder", vec![], vec![container("app", &[(GPU, 1)])]);
    allocate_on(&manager, &holder, &holder.containers[0], 0).await;
    let p = pod("uid-dra", vec![], vec![container("app", &[(GPU, 1)])]);
    let calls = plugin.calls().allocate.len();

    let legacy = manager
        .run_container_options(&p, &p.containers[0], None)
        .await;
    assert!(legacy.is_err(), "the hazard: {legacy:?}");
    assert_eq!(options_beside_dra(&manager, &p, &[GPU]).await, None);
    assert_eq!(plugin.calls().allocate.len(), calls);
    assert!(manager.container_devices("uid-dra", "app").is_empty());
}

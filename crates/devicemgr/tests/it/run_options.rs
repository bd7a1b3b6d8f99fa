//! How the allocate responses of a container's resources merge into its run options.

use corral_devicemgr::{ContainerAllocation, ResourceAllocations, RunContainerOptions};

use crate::support::allocate_response;

/// A response whose annotations repeat its environment.
fn response(
    env: &[(&str, &str)],
    dev: &[(&str, &str)],
    mnt: &[(&str, &str)],
    cdi: &[&str],
) -> corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse {
    let mut response = allocate_response(env, dev, mnt, cdi);
    response.annotations = response.envs.clone();
    response
}

#[test]
fn first_setting_wins() {
    // Upstream TestDeviceRunContainerOptions-style merge: duplicates are skipped,
    // conflicts keep the first value.
    let mut resources = ResourceAllocations::new();
    resources.insert(
        "a.com/r1".into(),
        ContainerAllocation {
            devices: Default::default(),
            response: Some(response(
                &[("E", "1"), ("F", "x")],
                &[("/dev/a", "/dev/h1")],
                &[("/m", "/h")],
                &["v/c=1"],
            )),
        },
    );
    resources.insert(
        "b.com/r2".into(),
        ContainerAllocation {
            devices: Default::default(),
            response: Some(response(
                &[("E", "2"), ("G", "y")],
                &[("/dev/a", "/dev/h2"), ("/dev/b", "/dev/hb")],
                &[("/m", "/other")],
                &["v/c=1", "v/c=2"],
            )),
        },
    );
    let opts = RunContainerOptions::merge(&resources);
    let envs: Vec<_> = opts
        .envs
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(envs, vec![("E", "1"), ("F", "x"), ("G", "y")]);
    assert_eq!(opts.devices.len(), 2);
    assert_eq!(opts.devices[0].path_on_host, "/dev/h1");
    assert_eq!(opts.mounts.len(), 1);
    assert_eq!(opts.mounts[0].host_path, "/h");
    assert_eq!(opts.annotations.len(), 3);
    assert_eq!(
        opts.cdi_devices,
        vec!["v/c=1".to_owned(), "v/c=2".to_owned()]
    );
}

//! NRI v0.10's events through [`NodePlugin`] on a node with the static CPU policy:
//! `ValidateContainerAdjustment` rejects another plugin's change of a pinned container's
//! cpuset (as the adjustment of the container being created or as an update of one already
//! running), accepts it with `nriGuardPinnedCpusets` off and for a container corral did not
//! pin; `UpdatePodSandbox` refuses a pinned pod's resize as `UpdateContainer` refuses a
//! container's. None of them writes anything.

use std::collections::HashMap;

use corral_proto::nri::api::{self, Event};
use corral_proto::nri::plugin::NriPlugin;

use super::plugin::NodePlugin;
use super::tests::settings;
use super::tests_sync_cost::{container_of, sandbox};
use crate::config::PinnedCpusets;
use crate::node::tests::started;

/// Guaranteed, 2 CPUs, 64 MiB.
fn guaranteed(n: u8, id: &str) -> api::Container {
    container_of(n, "c", id, Some((2048, 200_000)), Some(64 << 20))
}

/// Burstable pod `n`'s sandbox and a container of it with a 0.5 CPU request.
fn burstable(n: u8, id: &str) -> (api::PodSandbox, api::Container) {
    (
        super::tests::pod(n, 1),
        container_of(n, "c", id, Some((512, 0)), None),
    )
}

fn cpuset(cpus: &str) -> Option<api::LinuxResources> {
    Some(api::LinuxResources {
        cpu: Some(api::LinuxCpu {
            cpus: cpus.into(),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The validation of `container`'s creation whose adjustment sets `cpus`, owned by
/// `owner`, with `updates` (container id, cpus, owner) to other containers.
fn validation(
    pod: api::PodSandbox,
    container: &api::Container,
    cpus: &str,
    owner: &str,
    updates: &[(&str, &str, &str)],
) -> api::ValidateContainerAdjustmentRequest {
    let cpus_owner = |owner: &str| api::FieldOwners {
        simple: HashMap::from([(api::Field::CpuSetCpUs as i32, owner.to_owned())]),
        compound: HashMap::new(),
    };
    let mut owners = HashMap::from([(container.id.clone(), cpus_owner(owner))]);
    let mut update = Vec::new();
    for &(id, cpus, owner) in updates {
        owners.insert(id.to_owned(), cpus_owner(owner));
        update.push(api::ContainerUpdate {
            container_id: id.to_owned(),
            linux: Some(api::LinuxContainerUpdate {
                resources: cpuset(cpus),
            }),
            ignore_failure: false,
        });
    }
    api::ValidateContainerAdjustmentRequest {
        pod: Some(pod),
        container: Some(container.clone()),
        adjust: Some(api::ContainerAdjustment {
            linux: Some(api::LinuxContainerAdjustment {
                resources: cpuset(cpus),
                ..Default::default()
            }),
            ..Default::default()
        }),
        update,
        owners: Some(api::OwningPlugins { owners }),
        plugins: vec![
            api::PluginInstance {
                name: "corral".into(),
                index: "50".into(),
            },
            api::PluginInstance {
                name: "tuner".into(),
                index: "60".into(),
            },
        ],
    }
}

fn cpus_of(created: &api::CreateContainerResponse) -> String {
    let linux = created.adjust.as_ref().and_then(|a| a.linux.as_ref());
    let resources = linux.and_then(|l| l.resources.as_ref());
    resources.and_then(|r| r.cpu.as_ref()).unwrap().cpus.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_plugins_change_of_a_pinned_cpuset_is_rejected_unless_the_guard_is_off() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let guarded = NodePlugin::new(node.clone(), &settings(PinnedCpusets::Guarded));
    let open = NodePlugin::new(node.clone(), &settings(PinnedCpusets::Open));
    let configure = api::ConfigureRequest::default();
    let guarded_events = guarded.configure(configure.clone()).await.unwrap();
    assert!(guarded_events.contains(Event::ValidateContainerAdjustment));
    assert!(guarded_events.contains(Event::UpdatePodSandbox));
    let open_events = open.configure(configure).await.unwrap();
    assert!(!open_events.contains(Event::ValidateContainerAdjustment));

    let pinned = guaranteed(0, "g-0");
    let created = guarded
        .create_container(api::CreateContainerRequest {
            pod: Some(sandbox(0)),
            container: Some(pinned.clone()),
        })
        .await
        .unwrap();
    let granted = cpus_of(&created);
    let (pod_b, shared) = burstable(1, "b-1");
    guarded
        .create_container(api::CreateContainerRequest {
            pod: Some(pod_b.clone()),
            container: Some(shared.clone()),
        })
        .await
        .unwrap();
    node.commit().await.unwrap();
    let syncs = node.state_syncs();

    // corral's own adjustment.
    let own = validation(sandbox(0), &pinned, &granted, "50-corral", &[]);
    assert!(
        !guarded
            .validate_container_adjustment(own)
            .await
            .unwrap()
            .reject
    );
    // Another plugin moves the pinned container onto CPUs 8-15.
    let moved = validation(sandbox(0), &pinned, "8-15", "60-tuner", &[]);
    let answer = guarded
        .validate_container_adjustment(moved.clone())
        .await
        .unwrap();
    assert!(answer.reject);
    assert_eq!(
        answer.reason,
        format!(
            "corral pinned container c of pod default/p0 to cpuset.cpus {granted}; plugin \
             60-tuner sets it to \"8-15\" (nriGuardPinnedCpusets)"
        )
    );
    // With the guard off: accepted.
    let answer = open.validate_container_adjustment(moved).await.unwrap();
    assert_eq!(answer, api::ValidateContainerAdjustmentResponse::default());
    // A container corral did not pin (the shared pool): accepted.
    let unpinned = validation(pod_b.clone(), &shared, "8-15", "60-tuner", &[]);
    let answer = guarded
        .validate_container_adjustment(unpinned)
        .await
        .unwrap();
    assert!(!answer.reject, "{}", answer.reason);
    // Creating the Burstable container, the other plugin also updates the pinned one.
    let updated = validation(pod_b, &shared, "", "", &[("g-0", "0-15", "60-tuner")]);
    let answer = guarded
        .validate_container_adjustment(updated)
        .await
        .unwrap();
    assert!(answer.reject);
    assert!(
        answer
            .reason
            .contains("plugin 60-tuner sets it to \"0-15\""),
        "{}",
        answer.reason
    );
    node.commit().await.unwrap();
    assert_eq!(node.state_syncs(), syncs, "validations write nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_pods_resize_is_refused_and_others_go_through() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(node.clone(), &settings(PinnedCpusets::Guarded));
    let pinned = guaranteed(0, "g-0");
    let (pod_b, shared) = burstable(1, "b-1");
    for (pod, container) in [
        (sandbox(0), pinned.clone()),
        (pod_b.clone(), shared.clone()),
    ] {
        let request = api::CreateContainerRequest {
            pod: Some(pod),
            container: Some(container),
        };
        plugin.create_container(request).await.unwrap();
    }
    node.commit().await.unwrap();
    let syncs = node.state_syncs();
    // The kubelet's UpdatePodSandboxResources: the pod's resources before and after.
    let resize = |mut pod: api::PodSandbox, container: &api::Container, shares: u64| {
        let before = container.linux.as_ref().and_then(|l| l.resources.clone());
        let mut after = before.clone().unwrap();
        after.cpu.as_mut().unwrap().shares = Some(api::OptionalUInt64 { value: shares });
        pod.linux.as_mut().unwrap().pod_resources = before;
        api::UpdatePodSandboxRequest {
            pod: Some(pod),
            overhead_linux_resources: None,
            linux_resources: Some(after),
        }
    };
    let err = plugin
        .update_pod_sandbox(resize(sandbox(0), &pinned, 4096))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Infeasible: Resize is infeasible for Guaranteed Pods alongside CPU Manager static policy"
    );
    // The same resources: no resize.
    plugin
        .update_pod_sandbox(resize(sandbox(0), &pinned, 2048))
        .await
        .unwrap();
    // A Burstable pod: resized (its containers keep the shared pool, as UpdateContainer
    // answers).
    plugin
        .update_pod_sandbox(resize(pod_b, &shared, 1024))
        .await
        .unwrap();
    // A pod corral does not hold.
    plugin
        .update_pod_sandbox(resize(sandbox(5), &pinned, 4096))
        .await
        .unwrap();
    node.commit().await.unwrap();
    assert_eq!(node.state_syncs(), syncs, "pod updates write nothing");
}

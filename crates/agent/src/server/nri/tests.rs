//! Random container lives through [`NodePlugin`], applied as a runtime applies NRI answers
//! (each container's cpuset from its adjustment, then every update): no CPU is exclusive to
//! two containers, and every live container runs on what the CPU manager decided — its
//! exclusive CPUs, or exactly the shared pool (a stopped container keeps its CPUs, so a stop
//! changes no pool; a removed pod's CPUs reach the shared containers with the reconcile).

use std::collections::BTreeMap;

use corral_proto::nri::api;
use corral_proto::nri::plugin::NriPlugin;
use corral_topology::CpuSet;
use proptest::prelude::*;

use super::plugin::NodePlugin;
use crate::config::PinnedCpusets;
use crate::node::tests::started;

#[derive(Debug, Clone)]
enum Step {
    /// Create container `container` in pod `pod` of class `qos` (0 Guaranteed with `cpus`
    /// whole CPUs, 1 Burstable, 2 BestEffort; a pod keeps the class it was created with).
    Create {
        pod: u8,
        container: u8,
        qos: u8,
        cpus: u8,
    },
    /// Stop and remove a container.
    Stop { pod: u8, container: u8 },
    /// Remove a pod sandbox.
    RemovePod { pod: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..4, 0u8..3, 0u8..3, 1u8..5).prop_map(|(pod, container, qos, cpus)| {
            Step::Create { pod, container, qos, cpus }
        }),
        1 => (0u8..4, 0u8..3).prop_map(|(pod, container)| Step::Stop { pod, container }),
        1 => (0u8..4).prop_map(|pod| Step::RemovePod { pod }),
    ]
}

/// What `corral run --nri` runs with (index 50, the kubelet's podresources socket absent),
/// with `pinned_cpusets`.
pub(super) fn settings(pinned_cpusets: PinnedCpusets) -> crate::config::NriSettings {
    crate::config::NriSettings {
        plugin: corral_proto::nri::plugin::PluginConfig::new("corral", "50").unwrap(),
        kubelet_pod_resources: "/nonexistent/kubelet.sock".into(),
        pinned_cpusets,
        disconnected_grace: crate::config::DEFAULT_NRI_DISCONNECTED_GRACE,
    }
}

/// Pod `n`'s sandbox, of QoS class `qos` (0 Guaranteed, 1 Burstable, 2 BestEffort).
pub(super) fn pod(n: u8, qos: u8) -> api::PodSandbox {
    let qos = ["", "/burstable", "/besteffort"][usize::from(qos)];
    api::PodSandbox {
        id: format!("sb-{n}"),
        name: format!("p{n}"),
        uid: format!("uid-{n}"),
        namespace: "default".into(),
        linux: Some(api::LinuxPodSandbox {
            cgroup_parent: format!("/kubepods{qos}/poduid-{n}"),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container(pod: u8, n: u8, qos: u8, cpus: u8) -> api::Container {
    let guaranteed = qos == 0;
    let milli = match qos {
        0 => u64::from(cpus) * 1000,
        1 => 250,
        _ => 0,
    };
    api::Container {
        id: format!("c-{pod}-{n}"),
        pod_sandbox_id: format!("sb-{pod}"),
        name: format!("c{n}"),
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: Some(api::LinuxCpu {
                    shares: Some(api::OptionalUInt64 {
                        value: (milli * 1024 / 1000).max(2),
                    }),
                    quota: guaranteed.then_some(api::OptionalInt64 {
                        value: (milli * 100) as i64,
                    }),
                    period: Some(api::OptionalUInt64 { value: 100_000 }),
                    ..Default::default()
                }),
                memory: (qos < 2).then(|| api::LinuxMemory {
                    limit: Some(api::OptionalInt64 { value: 64 << 20 }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn cpus_of(resources: Option<&api::LinuxResources>) -> Option<CpuSet> {
    Some(resources?.cpu.as_ref()?.cpus.parse().unwrap())
}

/// What the runtime has applied: container id → (pod uid, name, cpuset).
type Applied = BTreeMap<String, (String, String, CpuSet)>;

fn apply(applied: &mut Applied, updates: &[api::ContainerUpdate]) {
    for update in updates {
        let cpus = cpus_of(update.linux.as_ref().and_then(|l| l.resources.as_ref()));
        if let (Some(entry), Some(cpus)) = (applied.get_mut(&update.container_id), cpus) {
            entry.2 = cpus;
        }
    }
}

async fn live(steps: Vec<Step>) {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "best-effort", &[]).await;
    let plugin = NodePlugin::new(
        node.clone(),
        &super::tests::settings(PinnedCpusets::Guarded),
    );
    // The QoS a pod was created with: a pod's containers share it, as in Kubernetes.
    let mut pods: BTreeMap<u8, u8> = BTreeMap::new();
    let mut applied = Applied::new();
    for step in steps {
        match step {
            Step::Create {
                pod: p,
                container: c,
                qos,
                cpus,
            } => {
                let qos = *pods.entry(p).or_insert(qos);
                let (sandbox, ctr) = (pod(p, qos), container(p, c, qos, cpus));
                if applied.contains_key(&ctr.id) {
                    continue;
                }
                let request = api::CreateContainerRequest {
                    pod: Some(sandbox.clone()),
                    container: Some(ctr.clone()),
                };
                let pool_before = node.cpu().state().default_cpu_set().clone();
                // A refusal (no room) is a valid answer: the container is not created.
                let answer = plugin.create_container(request).await;
                // The pod's stopped containers gave back their CPUs before the decision; a
                // pool that only grew is not pushed with the answer (a refusal carries
                // nothing) but by the reconcile, as after a pod's removal.
                let pool = node.cpu().state().default_cpu_set().clone();
                if pool != pool_before && pool_before.is_subset_of(&pool) {
                    reconcile(&node, &mut applied);
                }
                if let Ok(answer) = answer {
                    let adjust = answer.adjust.as_ref().and_then(|a| a.linux.as_ref());
                    let cpus = cpus_of(adjust.and_then(|l| l.resources.as_ref())).unwrap();
                    applied.insert(
                        ctr.id.clone(),
                        (sandbox.uid.clone(), ctr.name.clone(), cpus),
                    );
                    apply(&mut applied, &answer.update);
                }
            }
            Step::Stop {
                pod: p,
                container: c,
            } => {
                let id = format!("c-{p}-{c}");
                if applied.remove(&id).is_none() {
                    continue;
                }
                let qos = pods[&p];
                let request = api::StopContainerRequest {
                    pod: Some(pod(p, qos)),
                    container: Some(container(p, c, qos, 1)),
                };
                let answer = plugin.stop_container(request).await.unwrap();
                apply(&mut applied, &answer.update);
            }
            Step::RemovePod { pod: p } => {
                let Some(qos) = pods.remove(&p) else {
                    continue;
                };
                let uid = format!("uid-{p}");
                let running = applied.values().any(|(u, ..)| *u == uid);
                if running {
                    // A runtime stops a pod's containers before removing its sandbox.
                    for c in 0..3 {
                        let id = format!("c-{p}-{c}");
                        if applied.remove(&id).is_some() {
                            let request = api::StopContainerRequest {
                                pod: Some(pod(p, qos)),
                                container: Some(container(p, c, qos, 1)),
                            };
                            let answer = plugin.stop_container(request).await.unwrap();
                            apply(&mut applied, &answer.update);
                        }
                    }
                }
                let event = api::StateChangeEvent {
                    event: api::Event::RemovePodSandbox as i32,
                    pod: Some(pod(p, qos)),
                    container: None,
                };
                plugin.state_change(event).await.unwrap();
                // The pod's CPUs went back to the pool; the CPU manager's reconcile (every
                // `cpuManagerReconcilePeriod`, as the kubelet's) gives the shared
                // containers the larger pool.
                reconcile(&node, &mut applied);
            }
        }
        // Invariants after every step.
        let cpu = node.cpu();
        let pool = cpu.state().default_cpu_set().clone();
        let mut exclusive_seen = CpuSet::new();
        for (id, (uid, name, cpus)) in &applied {
            let exclusive = cpu.exclusive_cpus(uid, name);
            if exclusive.is_empty() {
                assert_eq!(cpus, &pool, "{id} runs on the shared pool");
            } else {
                assert_eq!(cpus, &exclusive, "{id} runs on its exclusive CPUs");
                assert!(
                    !exclusive_seen.intersects(&exclusive),
                    "{id}: {exclusive} taken twice"
                );
                exclusive_seen = exclusive_seen.union(&exclusive);
                assert!(
                    !pool.intersects(&exclusive),
                    "{id}: {exclusive} also in the pool"
                );
            }
        }
    }
}

/// The CPU manager's reconcile (every `cpuManagerReconcilePeriod`, as the kubelet's): the
/// shared containers run on the pool as it is.
fn reconcile(node: &crate::node::Node, applied: &mut Applied) {
    let pool = node.cpu().state().default_cpu_set().clone();
    for (uid, name, cpus) in applied.values_mut() {
        if node.cpu().exclusive_cpus(uid, name).is_empty() {
            *cpus = pool.clone();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_container_lives_keep_cpus_exclusive_and_the_pool_exact(
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(live(steps));
    }
}

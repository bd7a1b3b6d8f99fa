//! The scheduler plugin's single-numa-node Filter (ported in `corral_nrt::filter`), replayed
//! over the NodeResourceTopology corral would publish before each admission, agrees with
//! corral's own admission on random pods: a pod the plugin lets through is admitted, one it
//! turns away is refused, at container and at pod scope, while pods come and go.
//!
//! Pods ask for whole CPUs (or are Burstable): for a Guaranteed pod with a fraction of a CPU
//! the plugin checks `available` while the static CPU policy puts it in the shared pool — an
//! upstream divergence the plugin has with every exporter (docs/nrt.md).

use std::sync::Arc;

use corral_nrt::{Amount, Container, Fit, NodeAllocatable, PodRequests, QosClass, filter};
use corral_testkit::adversarial::XorShift;
use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::accounting::Accounting;
use crate::node::tests_concurrent::{config, machine, open};
use crate::node::{Admission, Node};

const MI: i64 = 1 << 20;

/// One container's ask: whole CPUs, memory and 2 MiB huge pages in MiB.
#[derive(Clone, Copy, Debug)]
struct Ask {
    cpus: i64,
    memory_mib: i64,
    huge_mib: i64,
}

fn random_pod(rng: &mut XorShift) -> (bool, Vec<Ask>) {
    let guaranteed = rng.below(5) != 0;
    let containers = 1 + rng.below(2) as usize;
    let asks = (0..containers)
        .map(|_| Ask {
            cpus: 1 + rng.below(4) as i64,
            memory_mib: 64 * (1 + rng.below(8) as i64),
            // Huge pages cannot be overcommitted: Guaranteed pods only.
            huge_mib: if guaranteed {
                2 * rng.below(4) as i64
            } else {
                0
            },
        })
        .collect();
    (guaranteed, asks)
}

fn manifest(uid: &str, guaranteed: bool, asks: &[Ask]) -> K8sPod {
    let containers: Vec<_> = asks
        .iter()
        .enumerate()
        .map(|(i, ask)| {
            let mut list = serde_json::json!({
                "cpu": ask.cpus.to_string(),
                "memory": format!("{}Mi", ask.memory_mib),
            });
            if ask.huge_mib > 0 {
                list["hugepages-2Mi"] = format!("{}Mi", ask.huge_mib).into();
            }
            let resources = if guaranteed {
                serde_json::json!({"limits": list})
            } else {
                serde_json::json!({"requests": list})
            };
            serde_json::json!({"name": format!("c{i}"), "resources": resources})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": containers},
    }))
    .unwrap()
}

/// The pod as the scheduler plugin sees it (Burstable: requests only).
fn requests(guaranteed: bool, asks: &[Ask]) -> PodRequests {
    let containers = asks
        .iter()
        .enumerate()
        .map(|(i, ask)| {
            let mut container = Container::named(&format!("c{i}"))
                .request("cpu", Amount::units(ask.cpus))
                .request("memory", Amount::units(ask.memory_mib * MI));
            if ask.huge_mib > 0 {
                container = container.request("hugepages-2Mi", Amount::units(ask.huge_mib * MI));
            }
            container
        })
        .collect();
    let qos = if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    };
    PodRequests::new(qos, containers)
}

/// `steps` random admissions and releases on a 3-node machine at `scope`; every admission's
/// answer is compared with the plugin's verdict on the object taken just before.
async fn replay(scope: &str, seed: u64, steps: usize) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", scope);
    // 3 NUMA nodes × 4 CPUs (CPU 0 reserved), 1 GiB and 32 huge pages each.
    let node: Arc<Node> = open(&config, &machine(3, 4, 1024, 32)).await;
    let accounting = Accounting::new("n", &config.cpu_manager);
    let mut rng = XorShift::new(seed);
    let mut admitted: Vec<String> = Vec::new();
    let (mut fits, mut refusals) = (0, 0);
    for step in 0..steps {
        if !admitted.is_empty() && rng.below(3) == 0 {
            let uid = admitted.swap_remove(rng.below(admitted.len() as u64) as usize);
            assert!(node.release(&uid).await.unwrap());
            continue;
        }
        let (guaranteed, asks) = random_pod(&mut rng);
        let nrt = accounting.take(&node);
        let verdict = filter(
            &nrt,
            &NodeAllocatable::from_zones(&nrt),
            &requests(guaranteed, &asks),
        );
        let uid = format!("p{step}");
        let answer = node
            .admit(manifest(&uid, guaranteed, &asks), vec![])
            .await
            .unwrap();
        match (&verdict, &answer) {
            (Ok(fit), Admission::Admitted(view)) => {
                fits += 1;
                admitted.push(uid.clone());
                // Where the plugin expects each app container, the topology manager put it.
                if let Fit::Containers(numa) = fit
                    && guaranteed
                {
                    let placed: Vec<usize> =
                        view.containers.iter().map(|c| c.numa_affinity[0]).collect();
                    assert_eq!(&placed, numa, "seed {seed} step {step}: {asks:?}");
                }
            }
            (
                Err(_),
                Admission::Rejected {
                    reason, message, ..
                },
            ) => {
                refusals += 1;
                // Upstream's two refusals of a pod no NUMA node can hold: the merge's, and
                // the memory manager's when no group of nodes has the memory left either.
                assert!(
                    reason == "TopologyAffinityError"
                        || message.contains("[memorymanager] failed to find NUMA nodes"),
                    "seed {seed} step {step}: {answer:?}"
                );
            }
            _ => panic!(
                "seed {seed} step {step}: the plugin says {verdict:?}, corral answered {answer:?} \
                 for {asks:?} (guaranteed: {guaranteed}) on {nrt:?}"
            ),
        }
    }
    (fits, refusals)
}

#[tokio::test]
async fn the_plugins_filter_agrees_with_admission_at_container_scope() {
    for seed in [1, 2, 3] {
        let (fits, refusals) = replay("container", seed, 120).await;
        // Both answers are exercised, not just one.
        assert!(
            fits > 10 && refusals > 5,
            "seed {seed}: {fits} fits, {refusals} refusals"
        );
    }
}

#[tokio::test]
async fn the_plugins_filter_agrees_with_admission_at_pod_scope() {
    for seed in [4, 5, 6] {
        let (fits, refusals) = replay("pod", seed, 120).await;
        assert!(
            fits > 10 && refusals > 5,
            "seed {seed}: {fits} fits, {refusals} refusals"
        );
    }
}

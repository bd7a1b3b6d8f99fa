//! Property: under any sequence of prepare / unprepare / restart with a well-behaved
//! driver, the checkpoint always equals the cache, a claim is cached exactly while some
//! pod references it, and the driver holds prepared exactly the cached claims.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use corral_checkpoint::StateFile;
use corral_checkpoint::{Checkpoint, DraManagerCheckpoint};
use corral_dra::{DraManager, DraManagerConfig, PodClaim, PodClaims, ResourceClaim};
use proptest::prelude::*;

use crate::support::fake_driver::{Answer, FAKE_DRIVER, FakeDriver};
use crate::support::{allocated, claim_in};

#[derive(Debug, Clone)]
enum Op {
    Prepare { pod: u8, claims: Vec<u8> },
    Unprepare { pod: u8 },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4, proptest::collection::vec(0u8..4, 1..3))
            .prop_map(|(pod, claims)| Op::Prepare { pod, claims }),
        (0u8..4).prop_map(|pod| Op::Unprepare { pod }),
        Just(Op::Restart),
    ]
}

fn claim(n: u8) -> ResourceClaim {
    let device = allocated("r", FAKE_DRIVER, "p", "x");
    claim_in("ns", &format!("c{n}"), device, &POD_UIDS)
}

/// Every claim is reserved for these pods.
const POD_UIDS: [&str; 4] = ["pod-0", "pod-1", "pod-2", "pod-3"];

proptest! {
    #[test]
    fn cache_checkpoint_and_driver_agree(ops in proptest::collection::vec(op(), 1..25)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let driver = Arc::new(FakeDriver::new(Answer::Devices));
        let store = StateFile::in_memory();
        let all: Vec<ResourceClaim> = (0..4).map(claim).collect();
        let mut model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut manager = DraManager::new(store.clone(), Arc::clone(&driver), DraManagerConfig::default()).unwrap();
        for op in ops {
            match op {
                Op::Prepare { pod, claims } => {
                    let uid = format!("pod-{pod}");
                    let p = PodClaims {
                        uid: uid.clone(),
                        namespace: "ns".into(),
                        name: uid.clone(),
                        claims: claims.iter().map(|c| PodClaim { name: format!("c{c}"), claim_name: Some(format!("c{c}")) }).collect(),
                    };
                    runtime.block_on(manager.prepare_resources(&p, &all)).unwrap();
                    for c in claims {
                        model.entry(format!("ns/c{c}")).or_default().insert(uid.clone());
                    }
                }
                Op::Unprepare { pod } => {
                    let uid = format!("pod-{pod}");
                    runtime.block_on(manager.unprepare_resources(&uid)).unwrap();
                    for pods in model.values_mut() {
                        pods.remove(&uid);
                    }
                    model.retain(|_, pods| !pods.is_empty());
                }
                Op::Restart => {
                    drop(manager);
                    manager = DraManager::new(store.clone(), Arc::clone(&driver), DraManagerConfig::default()).unwrap();
                }
            }
            let cached: BTreeMap<String, BTreeSet<String>> = manager
                .claim_infos()
                .iter()
                .map(|c| (c.key(), c.pod_uids().map(str::to_owned).collect()))
                .collect();
            prop_assert_eq!(&cached, &model);
            let file = DraManagerCheckpoint::decode(&store.load().unwrap().unwrap()).unwrap();
            let in_file: BTreeSet<String> = file.claim_info_state_list.iter().flatten().map(|s| format!("{}/{}", s.namespace, s.claim_name)).collect();
            prop_assert_eq!(in_file, model.keys().cloned().collect::<BTreeSet<_>>());
            let held: BTreeSet<String> = driver.prepared.lock().unwrap().iter().map(|u| format!("ns/{}", u.trim_end_matches("-uid"))).collect();
            prop_assert_eq!(held, model.keys().cloned().collect::<BTreeSet<_>>());
        }
    }
}

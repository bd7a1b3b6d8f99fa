//! Property: under any sequence of prepare / unprepare / restart with a well-behaved
//! driver, the checkpoint always equals the cache, a claim is cached exactly while some
//! pod references it, and the driver holds prepared exactly the cached claims.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use corral_checkpoint::{Checkpoint, DraCheckpoint};
use corral_dra::{
    AllocatedDevice, ClaimRef, ConsumerRef, DraManager, DraManagerConfig, DriverCallError,
    DriverClients, MemoryStateStore, PodClaim, PodClaims, PrepareResults, PreparedDevice,
    ResourceClaim, UnprepareResults,
};
use proptest::prelude::*;

#[derive(Default)]
struct Tracking {
    prepared: Mutex<BTreeSet<String>>,
}

impl DriverClients for &Tracking {
    fn is_registered(&self, _: &str) -> bool {
        true
    }
    async fn node_prepare_resources(
        &self,
        _: &str,
        claims: &[ClaimRef],
    ) -> Result<PrepareResults, DriverCallError> {
        let mut prepared = self.prepared.lock().unwrap();
        Ok(claims
            .iter()
            .map(|c| {
                prepared.insert(c.uid.clone());
                let device = PreparedDevice {
                    request_names: vec![],
                    pool_name: "p".into(),
                    device_name: c.uid.clone(),
                    cdi_device_ids: vec![format!("v/c={}", c.uid)],
                };
                (c.uid.clone(), Ok(vec![device]))
            })
            .collect())
    }
    async fn node_unprepare_resources(
        &self,
        _: &str,
        claims: &[ClaimRef],
    ) -> Result<UnprepareResults, DriverCallError> {
        let mut prepared = self.prepared.lock().unwrap();
        Ok(claims
            .iter()
            .map(|c| {
                prepared.remove(&c.uid);
                (c.uid.clone(), Ok(()))
            })
            .collect())
    }
}

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
    ResourceClaim {
        namespace: "ns".into(),
        name: format!("c{n}"),
        uid: format!("c{n}-uid"),
        allocation: Some(vec![AllocatedDevice {
            request: "r".into(),
            driver: "d.example.com".into(),
            pool: "p".into(),
            device: "x".into(),
        }]),
        reserved_for: (0..4)
            .map(|p| ConsumerRef::pod("p", format!("pod-{p}")))
            .collect(),
    }
}

proptest! {
    #[test]
    fn cache_checkpoint_and_driver_agree(ops in proptest::collection::vec(op(), 1..25)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let driver = Tracking::default();
        let store = MemoryStateStore::new();
        let all: Vec<ResourceClaim> = (0..4).map(claim).collect();
        let mut model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut manager = DraManager::new(store.clone(), &driver, DraManagerConfig::default()).unwrap();
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
                    manager = DraManager::new(store.clone(), &driver, DraManagerConfig::default()).unwrap();
                }
            }
            let cached: BTreeMap<String, BTreeSet<String>> = manager
                .claim_infos()
                .iter()
                .map(|c| (c.key(), c.pod_uids().map(str::to_owned).collect()))
                .collect();
            prop_assert_eq!(&cached, &model);
            let file = DraCheckpoint::decode(&store.bytes().unwrap()).unwrap();
            let in_file: BTreeSet<String> = file.claim_info_state_list.iter().flatten().map(|s| format!("{}/{}", s.namespace, s.claim_name)).collect();
            prop_assert_eq!(in_file, model.keys().cloned().collect::<BTreeSet<_>>());
            let held: BTreeSet<String> = driver.prepared.lock().unwrap().iter().map(|u| format!("ns/{}", u.trim_end_matches("-uid"))).collect();
            prop_assert_eq!(held, model.keys().cloned().collect::<BTreeSet<_>>());
        }
    }
}

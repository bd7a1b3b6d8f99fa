//! `policy_static_test.go`'s harness: a static policy from (topology, reservation, options),
//! a state from literals, and `runStaticPolicyTestCase` as [`run_add`].

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_cpumgr::{
    AllocateError, CpuState, Policy, StaticPolicy, StaticPolicyOptions, TakeError, TopologyIndex,
};
use corral_topology::{NumaMask, PolicyName, TopologyHint};

use super::{make_pod, set};

/// Upstream `NewStaticPolicy(topo, numReserved, reserved, fakeManager, options)`.
pub(crate) fn policy(
    topo: Arc<TopologyIndex>,
    reserved: usize,
    explicit: &str,
    options: &[(&str, &str)],
) -> StaticPolicy {
    let map: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let options = StaticPolicyOptions::from_map(&map).unwrap();
    StaticPolicy::new(topo, reserved, &set(explicit), options, PolicyName::None).unwrap()
}

/// One `staticPolicyTest` row.
pub(crate) struct AddCase {
    pub(crate) description: &'static str,
    pub(crate) topo: fn() -> Arc<TopologyIndex>,
    pub(crate) reserved: usize,
    pub(crate) explicit: &'static str,
    pub(crate) options: &'static [(&'static str, &'static str)],
    pub(crate) state: CpuState,
    pub(crate) pod: (&'static str, i64, i64),
    pub(crate) hint: Option<&'static [usize]>,
    pub(crate) want: Result<&'static str, AllocateError>,
}

/// Upstream `runStaticPolicyTestCase`.
pub(crate) fn run_add(case: AddCase) {
    let mut p = policy((case.topo)(), case.reserved, case.explicit, case.options);
    let pod = make_pod("fakePod", case.pod.0, case.pod.1, case.pod.2);
    let container = pod.containers[0].clone();
    let hint = case.hint.map_or_else(TopologyHint::default, |bits| {
        TopologyHint::new(Some(NumaMask::new(bits.iter().copied()).unwrap()), true)
    });
    let mut st = case.state;
    let got = p.allocate(&mut st, &pod, &container, hint);
    let label = format!("{} options={:?}", case.description, case.options);
    match case.want {
        Ok("") => {
            assert_eq!(got, Ok(()), "{label}");
            assert!(st.cpu_set("fakePod", case.pod.0).is_none(), "{label}");
        }
        Ok(cpus) => {
            assert_eq!(got, Ok(()), "{label}");
            let assigned = st.cpu_set("fakePod", case.pod.0).cloned();
            assert_eq!(assigned, Some(set(cpus)), "{label}");
            assert!(!set(cpus).intersects(st.default_cpu_set()), "{label}");
        }
        Err(want) => {
            assert_eq!(got, Err(want), "{label}");
            assert!(st.cpu_set("fakePod", case.pod.0).is_none(), "{label}");
        }
    }
}

/// Upstream v1.32's message: "not enough cpus available to satisfy request: requested=…,
/// available=…".
pub(crate) fn not_enough(requested: usize, available: usize) -> AllocateError {
    AllocateError::Take(TakeError::NotEnoughCpus {
        requested,
        available,
    })
}

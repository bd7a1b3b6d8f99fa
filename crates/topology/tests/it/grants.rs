//! What an admission returns as granted: every container's grant from every provider,
//! merged, in both scopes and with pod-level allocation; on a failed allocation, exactly
//! what was granted before it (what the caller gives back).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use std::collections::BTreeMap;

use corral_topology::topologymanager::{Grant, TopologyManager, TopologyManagerConfig};
use corral_topology::{Container, Pod};

use crate::support::policy_cases::{h, p, two_nodes};
use crate::support::recorder::Recorder;

fn manager(policy: &str, scope: &str) -> TopologyManager {
    let config =
        TopologyManagerConfig::from_strings(policy, scope, &BTreeMap::new()).expect("config");
    TopologyManager::new(&config, &two_nodes()).expect("manager")
}

/// A provider granting each container `recorder/<name>`, failing on `fail_on`.
fn recorder(fail_on: Option<&'static str>) -> Arc<Recorder> {
    Arc::new(Recorder {
        hints: p(&[("cpu", vec![h(&[1], true)])]),
        seen: Mutex::default(),
        fail_on,
    })
}

fn pod() -> Pod {
    Pod {
        uid: "uid".into(),
        init_containers: vec![Container::new("init")],
        containers: vec![Container::new("a"), Container::new("b")],
        ..Pod::default()
    }
}

fn devices(grant: &Grant) -> BTreeSet<String> {
    grant.devices["recorder"].clone()
}

#[test]
fn an_admission_returns_every_grant_and_a_failed_one_what_was_granted_before() {
    for scope in ["container", "pod"] {
        let mut admitting = manager("restricted", scope);
        admitting.add_hint_provider(recorder(None));
        admitting.add_hint_provider(recorder(None));
        let result = admitting.admit(&pod());
        assert!(result.admit, "{scope}");
        let names: Vec<&str> = result.grants.keys().map(String::as_str).collect();
        assert_eq!(names, ["a", "b", "init"], "{scope}");
        for (name, grant) in &result.grants {
            // Both providers granted the same device: merged, once.
            assert_eq!(devices(grant), BTreeSet::from([name.clone()]), "{scope}");
        }

        // The second provider fails on "a": "init" has both grants, "a" the first's only
        // (the first provider allocated it before the second failed), "b" none.
        let mut failing = manager("best-effort", scope);
        failing.add_hint_provider(recorder(None));
        failing.add_hint_provider(recorder(Some("a")));
        let result = failing.admit(&pod());
        assert!(!result.admit, "{scope}");
        let names: Vec<&str> = result.grants.keys().map(String::as_str).collect();
        assert_eq!(names, ["a", "init"], "{scope}");
    }
    // A merge the policy refuses allocates nothing: nothing granted.
    let mut refusing = manager("single-numa-node", "container");
    refusing.add_hint_provider(Arc::new(Recorder {
        hints: p(&[("cpu", vec![h(&[0, 1], true)])]),
        seen: Mutex::default(),
        fail_on: None,
    }));
    let result = refusing.admit(&pod());
    assert!(!result.admit);
    assert!(result.grants.is_empty(), "{:?}", result.grants);
}

//! `admit --dry-run` attacked: racing real admissions of other pods, of a pod with
//! device-plugin devices, of an admitted pod asking for other resources.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::Admission;
use super::tests::{WAIT, admitted, pod, snapshot, started};
use super::tests_concurrent::{config, guaranteed, machine, open, outcome};
use super::tests_gated_plugin::{GPU, GatedPlugin, Held};

/// The exclusive CPUs of every container of `view`.
fn cpus_of(view: &super::PodView) -> BTreeSet<String> {
    view.containers
        .iter()
        .filter(|c| c.exclusive_cpus)
        .map(|c| c.cpuset.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_racing_real_admissions_leave_the_real_results_untouched() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let numa_before = node.numa_resources();
    // 7 real pods of 2 CPUs fit (node 0: 7 allocatable CPUs, node 1: 8); 8 dry runs of 2
    // CPUs race them, each asking while real pods are decided.
    let mut real = Vec::new();
    let mut dry = Vec::new();
    for i in 0..8 {
        let n = Arc::clone(&node);
        real.push(tokio::spawn(async move {
            n.admit(pod(&format!("real-{i}"), &[2]), Vec::new()).await
        }));
        let n = Arc::clone(&node);
        dry.push(tokio::spawn(async move {
            n.admit_dry_run(pod(&format!("dry-{i}"), &[2]), Vec::new(), Vec::new())
                .await
        }));
    }
    let mut held = Vec::new();
    let mut refused = 0;
    for task in real {
        match tokio::time::timeout(WAIT, task)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Admission::Admitted(view) => held.push(view),
            Admission::Rejected { .. } => refused += 1,
        }
    }
    // As in any serial order: 7 admitted, the 8th refused, none sharing a CPU.
    assert_eq!((held.len(), refused), (7, 1));
    let mut all = BTreeSet::new();
    for view in &held {
        for set in cpus_of(view) {
            let set: corral_topology::CpuSet = set.parse().unwrap();
            for cpu in set.iter() {
                assert!(all.insert(cpu), "CPU {cpu} given twice");
            }
        }
    }
    for task in dry {
        let answer = tokio::time::timeout(WAIT, task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        // A dry run answers what a serial order would: admitted (2 exclusive CPUs) or
        // refused for lack of them, never an error.
        if let Admission::Admitted(view) = &answer {
            assert!(view.containers[0].exclusive_cpus, "{answer:?}");
        }
    }
    for i in 0..8 {
        assert!(node.pods().get(&format!("dry-{i}")).is_none());
    }
    // Settled now: exactly what the real pods hold is taken.
    let exclusive: u64 = node
        .numa_resources()
        .iter()
        .map(|n| n.cpus.as_ref().unwrap().exclusive)
        .sum();
    assert_eq!(exclusive, 14);
    let free_before: u64 = numa_before
        .iter()
        .map(|n| n.cpus.as_ref().unwrap().free)
        .sum();
    assert_eq!(free_before, 15);
    // Releasing the real pods gives back the node as it was: the dry runs kept nothing.
    for view in &held {
        node.release(&view.uid).await.unwrap();
    }
    assert_eq!(node.numa_resources(), numa_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_of_a_pod_with_devices_calls_no_allocate_and_reserves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "restricted", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    // Allocate is held: a dry run that called it would never answer.
    let plugin = GatedPlugin::start(&node, &[0, 0], Held::Allocate, false).await;
    let files = snapshot(dir.path());
    let numa = node.numa_resources();
    let wants_both = || {
        guaranteed(
            "gpus",
            serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "2"}),
        )
    };
    let answer = tokio::time::timeout(
        WAIT,
        node.admit_dry_run(wants_both(), Vec::new(), Vec::new()),
    )
    .await
    .expect("the dry run waited for Allocate")
    .unwrap();
    let Admission::Admitted(view) = &answer else {
        panic!("a dry run of a pod whose devices are free: {answer:?}");
    };
    assert_eq!(
        view.containers[0].devices[GPU].values().flatten().count(),
        2
    );
    assert!(plugin.allocations().is_empty(), "a dry run called Allocate");
    assert_eq!(snapshot(dir.path()), files, "a dry run wrote");
    assert_eq!(node.numa_resources(), numa, "a dry run kept devices");
    assert!(node.pods().get("gpus").is_none());
    // Both devices are free: a real admission gets them.
    plugin.open();
    let real = tokio::time::timeout(WAIT, node.admit(wants_both(), Vec::new()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome(&real), "admitted");
    assert_eq!(plugin.allocations().len(), 1);
    plugin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_of_an_admitted_pod_asking_for_more_writes_nothing() {
    let (dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let held = admitted(&node, pod("p", &[2])).await;
    let (files, numa) = (snapshot(dir.path()), node.numa_resources());
    let answer = node
        .admit_dry_run(pod("p", &[4]), Vec::new(), Vec::new())
        .await
        .unwrap();
    assert!(
        matches!(&answer, Admission::Rejected { reason, .. } if reason == "DryRunOfResize"),
        "{answer:?}"
    );
    let same = node
        .admit_dry_run(pod("p", &[2]), Vec::new(), Vec::new())
        .await
        .unwrap();
    assert!(
        matches!(&same, Admission::Admitted(view) if *view == held),
        "{same:?}"
    );
    assert_eq!(snapshot(dir.path()), files, "a dry run wrote");
    assert_eq!(node.numa_resources(), numa);
    assert_eq!(node.view("p").unwrap(), held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_dry_run_asks_for_the_preferred_allocation_and_allocates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "restricted", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    // Three devices on node 0, two wanted: a choice, so the plugin is asked its preference
    // (the decision is deferred, put back, and taken again); Allocate is held.
    let plugin = GatedPlugin::start(&node, &[0, 0, 0], Held::Allocate, false).await;
    let (files, numa) = (snapshot(dir.path()), node.numa_resources());
    let two = || {
        guaranteed(
            "two",
            serde_json::json!({"cpu": "1", "memory": "100Mi", GPU: "2"}),
        )
    };
    let answer = tokio::time::timeout(WAIT, node.admit_dry_run(two(), Vec::new(), Vec::new()))
        .await
        .expect("the dry run waited for Allocate")
        .unwrap();
    assert_eq!(outcome(&answer), "admitted", "{answer:?}");
    assert_eq!(plugin.questions().len(), 1, "the preference asked once");
    assert!(plugin.allocations().is_empty(), "a dry run called Allocate");
    assert_eq!(snapshot(dir.path()), files, "a dry run wrote");
    assert_eq!(node.numa_resources(), numa, "a dry run kept something");
    plugin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_with_a_dra_claim_prepares_nothing() {
    use super::tests::{pod_with_claim, sample_driver};
    let (dir, config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let driver = sample_driver(dir.path(), &config, &node).await;
    // Any call to the driver fails: a dry run that prepared would be refused for it.
    driver.set_behavior(corral_dra::sample::Behavior::FailCall(
        "a dry run called the driver".into(),
    ));
    let (files, numa) = (snapshot(dir.path()), node.numa_resources());
    let (pod, claim) = pod_with_claim("owner", "owner");
    let answer = node
        .admit_dry_run(pod, vec![claim], Vec::new())
        .await
        .unwrap();
    assert_eq!(outcome(&answer), "admitted", "{answer:?}");
    assert!(
        node.dra.claim_infos().is_empty(),
        "a dry run recorded a claim"
    );
    assert_eq!(snapshot(dir.path()), files, "a dry run wrote");
    assert_eq!(node.numa_resources(), numa);
    // The real admission does call it (and is refused for the driver's failure).
    let (pod, claim) = pod_with_claim("owner", "owner");
    let real = node.admit(pod, vec![claim]).await.unwrap();
    assert!(
        outcome(&real).contains("a dry run called the driver"),
        "{real:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_whose_decision_panics_leaves_no_trial_open() {
    let (dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let numa = node.numa_resources();
    super::pause::arm_panic("boom");
    let failed = node
        .admit_dry_run(pod("boom", &[4]), Vec::new(), Vec::new())
        .await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(
        node.numa_resources(),
        numa,
        "the panicked trial kept its CPUs"
    );
    assert!(node.pods().get("boom").is_none());
    // The managers left their trial: a real admission is written and counted.
    let files = snapshot(dir.path());
    let requests = node
        .cpu()
        .metrics()
        .pinning_requests_total
        .load(std::sync::atomic::Ordering::Relaxed);
    admitted(&node, pod("real", &[2])).await;
    assert_ne!(
        snapshot(dir.path()),
        files,
        "a real admission after the panic wrote nothing"
    );
    assert_eq!(
        node.cpu()
            .metrics()
            .pinning_requests_total
            .load(std::sync::atomic::Ordering::Relaxed),
        requests + 1,
        "a real admission after the panic was not counted"
    );
}

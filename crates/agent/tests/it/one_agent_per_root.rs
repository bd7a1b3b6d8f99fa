//! One agent per root: a second `corral run` on a root an agent is running on stops at once,
//! non-zero and saying so, before it replays the journal (which would roll the running
//! agent's files back to what it read) or touches a socket; the running agent keeps every
//! acknowledged pod and its device plugin.

use crate::support::{
    MACHINE, RunningAgent, STATIC_SINGLE_NUMA, WAIT, corral_run, log_file, stderr, wait_exit,
    workspace,
};

#[test]
fn a_second_agent_on_the_same_root_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let host = workspace().join(MACHINE);
    let flags = [STATIC_SINGLE_NUMA, &["--demo-devices", "4"]].concat();
    let agent = RunningAgent::start(&root, &host, &flags, &dir.path().join("first.log"));
    let gpu = workspace().join("examples/pods/gpu.yaml");
    let admitted = agent.cli(&["admit", "-f", gpu.to_str().unwrap()]);
    assert!(admitted.status.success(), "{}", stderr(&admitted));
    let before = crate::support::checkpoints(&root);

    for round in 0..3 {
        let log = dir.path().join(format!("second-{round}.log"));
        let mut second = corral_run(&root, &flags, log_file(&log));
        let status = wait_exit(&mut second, WAIT).expect("the second agent exits");
        let said = std::fs::read_to_string(&log).unwrap();
        assert!(!status.success(), "{said}");
        assert!(said.contains("in use by another process"), "{said}");
    }
    assert_eq!(crate::support::checkpoints(&root), before);
    // The first agent still serves its pods and its device plugin.
    let pod = dir.path().join("gpu2.yaml");
    let manifest = std::fs::read_to_string(&gpu)
        .unwrap()
        .replace("name: gpu", "name: gpu2");
    std::fs::write(&pod, manifest).unwrap();
    let again = agent.cli(&["admit", "-f", pod.to_str().unwrap()]);
    assert!(again.status.success(), "{}", stderr(&again));
}

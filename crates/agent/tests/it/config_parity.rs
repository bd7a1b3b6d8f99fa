//! `corral config check` and `corral run` agree: the same inputs (flags and config files)
//! through both subcommands of the real binary, on a sysfs fixture that fits every input,
//! so any refusal is the configuration's. Whatever `run` refuses at start, `config check`
//! refuses, with the same message; whatever `config check` accepts, `run` starts with.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{self, MACHINE, Reaped, WAIT, log_file, sigterm, wait_exit, workspace};

/// One input: a config file's text (if any) and flags.
struct Case {
    file: Option<&'static str>,
    flags: &'static [&'static str],
    /// Whether the configuration is valid (both must agree with this too).
    valid: bool,
}

const fn flags(flags: &'static [&'static str], valid: bool) -> Case {
    Case {
        file: None,
        flags,
        valid,
    }
}

const fn file(file: &'static str, valid: bool) -> Case {
    Case {
        file: Some(file),
        flags: &[],
        valid,
    }
}

const STATIC: &str = "--cpu-manager-policy=static";
const RESERVE_0: &str = "--reserved-system-cpus=0";
const ALPHA_GATE: &str = "featureGates: {CPUManagerPolicyAlphaOptions: true}\n";

const CASES: &[Case] = &[
    flags(&[], true),
    flags(&[STATIC, RESERVE_0], true),
    flags(
        &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=full-pcpus-only=true",
        ],
        true,
    ),
    // Options: names, values, combinations, and the policy that takes them.
    flags(
        &[STATIC, RESERVE_0, "--cpu-manager-policy-option=bogus=true"],
        false,
    ),
    flags(&["--cpu-manager-policy-option=bogus=true"], false),
    flags(
        &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=full-pcpus-only=yes",
        ],
        false,
    ),
    flags(
        &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=full-pcpus-only=true",
            "--cpu-manager-policy-option=distribute-cpus-across-cores=true",
        ],
        false,
    ),
    flags(
        &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=prefer-align-cpus-by-uncorecache=true",
            "--cpu-manager-policy-option=distribute-cpus-across-numa=true",
        ],
        false,
    ),
    flags(&["--cpu-manager-policy-option=full-pcpus-only=true"], false),
    flags(
        &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=align-by-socket=true",
            "--topology-manager-policy=single-numa-node",
        ],
        false,
    ),
    // align-by-socket is alpha in v1.36: refused unless featureGates turns
    // CPUManagerPolicyAlphaOptions on.
    flags(
        &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=align-by-socket=true",
            "--topology-manager-policy=restricted",
        ],
        false,
    ),
    Case {
        file: Some(ALPHA_GATE),
        flags: &[
            STATIC,
            RESERVE_0,
            "--cpu-manager-policy-option=align-by-socket=true",
            "--topology-manager-policy=restricted",
        ],
        valid: true,
    },
    // featureGates: what v1.36's kubelet refuses, and the gates over the options.
    file("featureGates: {MemoryManager: true}\n", false),
    file("featureGates: {CPUManagerPolicyOptions: false}\n", false),
    file(
        "featureGates: {TopologyManagerPolicyOptions: false}\ntopologyManagerPolicy: restricted\ntopologyManagerPolicyOptions: {prefer-closest-numa-nodes: \"true\"}\n",
        false,
    ),
    file(
        "featureGates: {TopologyManagerPolicyBetaOptions: false, KubeletPSI: true}\ntopologyManagerPolicy: restricted\ntopologyManagerPolicyOptions: {max-allowable-numa-nodes: \"8\"}\n",
        true,
    ),
    file(
        "featureGates: {CPUManagerPolicyBetaOptions: false}\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions: {distribute-cpus-across-numa: \"true\"}\n",
        false,
    ),
    flags(&["--cpu-manager-policy=dynamic"], false),
    // The static policy's reservation.
    flags(&[STATIC], false),
    file(
        "cpuManagerPolicy: static\nkubeReserved: {cpu: \"0\"}\n",
        false,
    ),
    file(
        "cpuManagerPolicy: static\nkubeReserved: {cpu: 500m}\nsystemReserved: {cpu: \"1\"}\n",
        true,
    ),
    // As the kubelet: reservedSystemCPUs replaces kubeReserved.cpu.
    file(
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\nkubeReserved: {cpu: \"2\"}\n",
        true,
    ),
    // The topology manager's policy, scope and options.
    flags(&["--topology-manager-policy=strict"], false),
    flags(&["--topology-manager-scope=node"], false),
    flags(
        &[
            "--topology-manager-policy=restricted",
            "--topology-manager-policy-option=bogus=true",
        ],
        false,
    ),
    flags(
        &[
            "--topology-manager-policy=restricted",
            "--topology-manager-policy-option=max-allowable-numa-nodes=4",
        ],
        false,
    ),
    flags(
        &[
            "--topology-manager-policy=best-effort",
            "--topology-manager-scope=pod",
            "--topology-manager-policy-option=prefer-closest-numa-nodes=true",
        ],
        true,
    ),
];

/// A `corral run`, killed and reaped on drop.
/// What `corral run` did with an input: started (then stopped with SIGTERM) or refused.
#[derive(Debug)]
enum RunOutcome {
    Started,
    Refused(String),
}

fn corral(dir: &Path, case: &Case, subcommand: &[&str]) -> Command {
    let mut command = support::corral();
    command
        .args(subcommand)
        .arg("--root")
        .arg(dir.join("root"))
        .arg("--host-root")
        .arg(workspace().join(MACHINE))
        .args(case.flags)
        .stdin(Stdio::null());
    if let Some(text) = case.file {
        let path = dir.join("config.yaml");
        std::fs::write(&path, text).unwrap();
        command.arg("--config").arg(path);
    }
    command
}

fn run(dir: &Path, case: &Case) -> RunOutcome {
    let log = dir.join("run.log");
    let mut child = Reaped(
        corral(dir, case, &["run"])
            .stdout(Stdio::null())
            .stderr(log_file(&log))
            .spawn()
            .expect("start corral run"),
    );
    let deadline = Instant::now() + WAIT;
    loop {
        if child.0.try_wait().unwrap().is_some() {
            return RunOutcome::Refused(std::fs::read_to_string(&log).unwrap());
        }
        let status = support::corral()
            .args(["status", "--root"])
            .arg(dir.join("root"))
            .output()
            .unwrap();
        if status.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "corral run neither started nor exited: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    sigterm(&child.0);
    wait_exit(&mut child.0, WAIT).expect("corral run ignored SIGTERM");
    RunOutcome::Started
}

#[test]
fn config_check_and_run_agree() {
    let mut disagreements = Vec::new();
    for (n, case) in CASES.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let check = corral(dir.path(), case, &["config", "check"])
            .output()
            .unwrap();
        let check_stderr = String::from_utf8_lossy(&check.stderr).into_owned();
        let outcome = run(dir.path(), case);
        let what = format!("case {n}: file {:?}, flags {:?}", case.file, case.flags);
        match (&outcome, check.status.success()) {
            (RunOutcome::Started, true) => {}
            (RunOutcome::Refused(run_stderr), false) => {
                // The same message: check's whole report is in run's error output.
                let report = check_stderr.trim();
                assert!(
                    report.starts_with("corral: invalid configuration:"),
                    "{what}: {report}"
                );
                if !run_stderr.contains(report) {
                    disagreements.push(format!(
                        "{what}: different messages\n  check: {report}\n  run: {run_stderr}"
                    ));
                }
            }
            (outcome, checked) => disagreements.push(format!(
                "{what}: config check {} but run {outcome:?}\n  check said: {check_stderr}",
                if checked { "accepted it" } else { "refused it" }
            )),
        }
        if check.status.success() != case.valid {
            disagreements.push(format!(
                "{what}: expected {}",
                if case.valid { "valid" } else { "invalid" }
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

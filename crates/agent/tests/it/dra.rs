//! DRA through the real `corral` binary and a foreign driver: `corral run` creates the
//! kubelet's directories at start (`plugins_registry/`, `plugins/`, `device-plugins/`,
//! `pod-resources/`, mode 0750 as `setupDataDirs` makes them), the Python grpcio driver
//! registers through `plugins_registry/` and serves `plugins/<driver>/dra.sock`, a pod with a
//! ResourceClaim (`resource.k8s.io/v1`, then `v1beta1`) is admitted through the CLI with the
//! driver's CDI device and share id (in `dra_manager_state` and podresources), and releasing
//! it unprepares the claim.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use corral_testkit::PythonPeer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::support::{MACHINE, RunningAgent, STATIC_SINGLE_NUMA, WAIT, workspace};

const DRIVER: &str = "py.example.com";

/// The Python driver's next event of `kind` (one JSON object per line on its stdout).
async fn event(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    kind: &str,
) -> Value {
    tokio::time::timeout(WAIT, async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("driver stdout open");
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if value["event"] == kind {
                return value;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind} event from the driver"))
}

fn manifest(claim_api: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: trainer, namespace: default, uid: trainer-uid}}
spec:
  containers:
    - name: main
      resources:
        claims: [{{name: gpu}}]
  resourceClaims:
    - {{name: gpu, resourceClaimName: gpu-claim}}
status:
  resourceClaimStatuses:
    - {{name: gpu, resourceClaimName: gpu-claim}}
---
apiVersion: {claim_api}
kind: ResourceClaim
metadata: {{name: gpu-claim, namespace: default, uid: claim-uid}}
spec: {{}}
status:
  allocation:
    devices:
      results:
        - {{request: gpu, driver: {DRIVER}, pool: python-pool, device: gpu-0}}
  reservedFor:
    - {{resource: pods, name: trainer, uid: trainer-uid}}
"
    )
}

fn status(agent: &RunningAgent) -> Value {
    let output = agent.cli(&["status", "-o", "json"]);
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_driver_registers_through_the_directories_corral_created() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let host = workspace().join(MACHINE);
    let agent = RunningAgent::start(&root, &host, STATIC_SINGLE_NUMA, &dir.path().join("log"));
    for name in [
        "plugins_registry",
        "plugins",
        "device-plugins",
        "pod-resources",
    ] {
        let meta = std::fs::metadata(root.join(name)).unwrap();
        assert!(meta.is_dir(), "{name}");
        assert_eq!(
            meta.permissions().mode() & 0o027,
            0,
            "{name}: group write or other access"
        );
    }

    let registry = root.join("plugins_registry");
    let plugins = root.join("plugins").join(DRIVER);
    let peer = PythonPeer::locate().unwrap();
    let args = [
        "dra-driver",
        "--driver",
        DRIVER,
        "--registry-dir",
        registry.to_str().unwrap(),
        "--plugin-dir",
        plugins.to_str().unwrap(),
        "--share-id",
        "share-{uid}",
    ];
    let mut child = peer.spawn(&args).unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut driver = Driver(child);
    let mut lines = BufReader::new(stdout).lines();
    let registered = event(&mut lines, "registration").await;
    assert_eq!(registered["registered"], true, "{registered}");

    let file = dir.path().join("pod.yaml");
    std::fs::write(&file, manifest("resource.k8s.io/v1")).unwrap();
    let admitted = admit_when_ready(&agent, &file).await;
    assert!(admitted.status.success(), "{admitted:?}");
    let prepare = event(&mut lines, "prepare").await;
    assert_eq!(prepare["claims"][0]["uid"], "claim-uid", "{prepare}");
    let pods = status(&agent);
    let main = &pods[0]["containers"][0];
    assert_eq!(
        main["cdiDevices"],
        serde_json::json!(["corral.example.com/python=py-claim-uid"]),
        "{main}"
    );
    // The driver's share id (KEP-5075) in dra_manager_state, as v1.36 writes it, and in
    // podresources (the Python grpcio client).
    let state = std::fs::read_to_string(root.join("dra_manager_state")).unwrap();
    assert!(state.contains("claim-uid"), "{state}");
    assert!(
        state.contains(r#"\"ShareID\":\"share-claim-uid\""#),
        "{state}"
    );
    let socket = root.join("pod-resources/kubelet.sock");
    let answer = crate::support::python_pod_resources(&socket, &[], "default/trainer").await;
    let dynamic = &answer["get"]["containers"][0]["dynamic_resources"][0];
    assert_eq!(dynamic["claim_name"], "gpu-claim", "{answer}");
    assert_eq!(
        dynamic["claim_resources"][0]["share_id"], "share-claim-uid",
        "{answer}"
    );
    assert_eq!(dynamic["claim_resources"][0]["driver"], DRIVER, "{answer}");

    assert!(agent.cli(&["release", "trainer-uid"]).status.success());
    let unprepare = event(&mut lines, "unprepare").await;
    assert_eq!(unprepare["claims"][0]["uid"], "claim-uid", "{unprepare}");

    // The same claim as a 1.32 cluster serves it (resource.k8s.io/v1beta1).
    std::fs::write(&file, manifest("resource.k8s.io/v1beta1")).unwrap();
    let admitted = agent.cli(&["admit", "-f", file.to_str().unwrap(), "-o", "json"]);
    assert!(admitted.status.success(), "{admitted:?}");
    let prepare = event(&mut lines, "prepare").await;
    assert_eq!(prepare["claims"][0]["uid"], "claim-uid", "{prepare}");
    assert!(agent.cli(&["release", "trainer-uid"]).status.success());
    event(&mut lines, "unprepare").await;
    drop(driver.0.stdin.take());
    let _ = tokio::time::timeout(WAIT, driver.0.wait()).await;
}

/// `corral admit -f FILE`, retried (bounded) while the agent has not yet seen the driver
/// (its registry is polled).
async fn admit_when_ready(agent: &RunningAgent, file: &Path) -> std::process::Output {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let output = agent.cli(&["admit", "-f", file.to_str().unwrap(), "-o", "json"]);
        let text = String::from_utf8_lossy(&output.stdout);
        if output.status.success() || !text.contains("not registered") {
            return output;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

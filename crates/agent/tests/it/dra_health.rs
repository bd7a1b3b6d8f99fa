//! DRA device health and rolling driver updates through the real `corral` binary with a
//! foreign driver (the Python grpcio peer) built on 1.36's protos: it registers through the
//! `plugins_registry/` corral created, advertises `v1alpha1.DRAResourceHealth`, prepares a
//! claim with a share id and streams its device's health; `corral status` shows the app
//! container's `allocatedResourcesStatus` (`claim:<podClaim>`, the device's CDI id, health
//! and message) and `dra_health_state` records it. A second instance of the driver (a
//! rolling update, `<driver>-<pod uid>-reg.sock`) takes over the calls and the health
//! stream, the first goes away, and the claim is neither lost nor re-prepared: the second
//! unprepares it.

use std::time::Duration;

use corral_testkit::PythonPeer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::support::{MACHINE, RunningAgent, STATIC_SINGLE_NUMA, WAIT, corral, workspace};

const DRIVER: &str = "py.example.com";
const VERSIONS: &str = "v1.DRAPlugin,v1alpha1.DRAResourceHealth";

/// One Python driver instance and its stdout events.
struct Instance {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Events read while waiting for another kind (the order of, e.g., `registration` and
    /// `health_stream` is not fixed: corral opens the stream as it registers the plugin).
    backlog: Vec<Value>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Instance {
    fn spawn(root: &std::path::Path, pod_uid: &str) -> Self {
        let registry = root.join("plugins_registry");
        let plugins = root.join("plugins").join(DRIVER);
        let args = [
            "dra-driver",
            "--driver",
            DRIVER,
            "--registry-dir",
            registry.to_str().unwrap(),
            "--plugin-dir",
            plugins.to_str().unwrap(),
            "--versions",
            VERSIONS,
            "--share-id",
            "share-{uid}",
            "--pod-uid",
            pod_uid,
            // A device's reported health holds this long (not the default 30 s): the test
            // checks it is kept across a handover, however slowly the handover goes.
            "--health-timeout",
            "3600",
        ];
        let mut child = PythonPeer::locate().unwrap().spawn(&args).unwrap();
        let stdout = child.stdout.take().unwrap();
        Instance {
            child,
            lines: BufReader::new(stdout).lines(),
            backlog: Vec::new(),
        }
    }

    /// The next event of `kind`.
    async fn event(&mut self, kind: &str) -> Value {
        if let Some(at) = self.backlog.iter().position(|e| e["event"] == kind) {
            return self.backlog.remove(at);
        }
        let backlog = &mut self.backlog;
        let lines = &mut self.lines;
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
                backlog.push(value);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {kind} event from the driver"))
    }

    async fn set_health(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        self.event("health").await;
    }

    /// Close stdin (the driver stops and removes its sockets) and wait for it.
    async fn stop(mut self) {
        drop(self.child.stdin.take());
        let stopped = self.event("stopped").await;
        assert_eq!(stopped["ok"], true, "{stopped}");
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }
}

const MANIFEST: &str = "apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default, uid: trainer-uid}
spec:
  containers:
    - name: main
      resources:
        claims: [{name: gpu}]
  resourceClaims:
    - {name: gpu, resourceClaimName: gpu-claim}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default, uid: claim-uid}
spec: {}
status:
  allocation:
    devices:
      results:
        - {request: gpu, driver: py.example.com, pool: python-pool, device: gpu-0}
  reservedFor:
    - {resource: pods, name: trainer, uid: trainer-uid}
";

/// The app container's `allocatedResourcesStatus` once `check` holds for it.
async fn resource_status(agent: &RunningAgent, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let output = agent.cli(&["status", "-o", "json"]);
        assert!(output.status.success(), "{output:?}");
        let pods: Value = serde_json::from_slice(&output.stdout).unwrap();
        let status = pods[0]["containers"][0]["allocatedResourcesStatus"].clone();
        if check(&status) {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn health_is(status: &Value, health: &str) -> bool {
    status[0]["resources"][0]["health"] == health
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_streams_health_and_is_replaced_without_losing_its_claim() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let host = workspace().join(MACHINE);
    let agent = RunningAgent::start(&root, &host, STATIC_SINGLE_NUMA, &dir.path().join("log"));

    let mut a = Instance::spawn(&root, "pod-a");
    let ready = a.event("ready").await;
    assert!(
        ready["registration_socket"]
            .as_str()
            .unwrap()
            .ends_with("py.example.com-pod-a-reg.sock"),
        "{ready}"
    );
    let registered = a.event("registration").await;
    assert_eq!(registered["registered"], true, "{registered}");
    let stream = a.event("health_stream").await;
    assert_eq!(stream["version"], "v1alpha1", "{stream}");

    let file = dir.path().join("pod.yaml");
    std::fs::write(&file, MANIFEST).unwrap();
    let admitted = agent.cli(&["admit", "-f", file.to_str().unwrap(), "-o", "json"]);
    assert!(admitted.status.success(), "{admitted:?}");
    a.event("prepare").await;

    // The device the claim got, healthy, under the kubelet's names.
    let status = resource_status(&agent, |s| health_is(s, "Healthy")).await;
    assert_eq!(status[0]["name"], "claim:gpu", "{status}");
    assert_eq!(
        status[0]["resources"][0]["resourceID"], "corral.example.com/python=py-claim-uid",
        "{status}"
    );
    assert!(
        status[0]["resources"][0].get("message").is_none(),
        "{status}"
    );

    // It turns unhealthy, with the driver's message; the health file records it.
    a.set_health("health Unhealthy ECC error count exceeded threshold\n")
        .await;
    let status = resource_status(&agent, |s| health_is(s, "Unhealthy")).await;
    assert_eq!(
        status[0]["resources"][0]["message"], "ECC error count exceeded threshold",
        "{status}"
    );
    let health = std::fs::read_to_string(root.join("dra_health_state")).unwrap();
    assert!(
        health.contains(r#""python-pool/py-claim-uid":{"PoolName":"python-pool","DeviceName":"py-claim-uid","Health":"Unhealthy""#),
        "{health}"
    );
    let inspect = corral()
        .args(["checkpoint", "inspect", "-o", "json"])
        .arg(root.join("dra_health_state"))
        .output()
        .unwrap();
    assert!(inspect.status.success(), "{inspect:?}");
    let inspected: Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(inspected["format"], "dra_health", "{inspected}");

    // A rolling update: instance B registers beside A and takes the health stream over.
    let mut b = Instance::spawn(&root, "pod-b");
    assert_eq!(b.event("registration").await["registered"], true);
    let stream = b.event("health_stream").await;
    assert_eq!(stream["version"], "v1alpha1", "{stream}");
    // B has prepared nothing, so its (complete) report leaves the device out: it keeps its
    // last health until its timeout (an hour here), not cleared by the handover.
    let status = resource_status(&agent, |s| health_is(s, "Unhealthy")).await;
    assert_eq!(
        status[0]["resources"][0]["resourceID"],
        "corral.example.com/python=py-claim-uid"
    );

    // A goes away; the claim stays prepared (keyed by driver, not instance).
    a.stop().await;
    let state = std::fs::read_to_string(root.join("dra_manager_state")).unwrap();
    assert!(
        state.contains("claim-uid") && state.contains("share-claim-uid"),
        "{state}"
    );

    // Releasing the pod unprepares the claim through B.
    let released = agent.cli(&["release", "trainer-uid"]);
    assert!(released.status.success(), "{released:?}");
    let unprepare = b.event("unprepare").await;
    assert_eq!(unprepare["claims"][0]["uid"], "claim-uid", "{unprepare}");
    let state = std::fs::read_to_string(root.join("dra_manager_state")).unwrap();
    assert!(!state.contains("claim-uid"), "{state}");
    b.stop().await;
}

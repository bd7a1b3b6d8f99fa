//! Chaos: the real `corral run` (16 CPUs on two NUMA nodes, static CPU policy, four demo
//! devices) SIGKILLed again and again while four clients admit and release pods in
//! parallel; between some restarts a state file is deleted or truncated. After every
//! restart:
//! - every acknowledged admission not (acknowledged) released is there with exactly the
//!   CPUs and devices it was acknowledged with, and nothing unacknowledged appears;
//! - no CPU is exclusive to two containers, no device is held twice, exclusive CPUs are
//!   not in the shared pool;
//! - a deleted or truncated state file is restored from the state journal (every state
//!   file is written through it: one fsync per admission), and the agent starts holding
//!   exactly what was acknowledged;
//! - with the journal lost too, a deleted state file that held an admitted pod's CPUs or
//!   devices, and every truncated one, makes the agent refuse to start, naming the file;
//!   with the file back it starts;
//! - every sixth restart the root is moved: the agent serves every acknowledged pod from
//!   the new place;
//! - every seventh restart the journal is damaged (a flipped bit or a cut at a random
//!   offset): the agent refuses to start, naming the journal and the remedy, or (damage
//!   only in the tail a kill left of a commit never answered) starts holding exactly what
//!   was acknowledged;
//! - no temp file of an interrupted write is left.
//!
//! `CORRAL_CHAOS_KILLS` sets the number of kills (default 200); `CORRAL_CHAOS_SEED` the seed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_client::AgentClient;

use crate::support::{Reaped, corral_run, log_file};

/// Longer than the other tests' wait: restarts under load on 2 cores.
const WAIT: Duration = Duration::from_secs(120);
/// A call's deadline. A call to a killed agent fails at once; one that hits this deadline
/// counts as unanswered (its outcome unknown), which the checks allow.
const RPC: Duration = Duration::from_secs(60);

/// xorshift64*: deterministic for a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one pod was acknowledged with: container → (cpuset, exclusive, devices).
type Held = BTreeMap<String, (String, bool, BTreeSet<String>)>;

fn held(pod: &api::PodAllocation) -> Held {
    pod.containers
        .iter()
        .map(|c| {
            let devices = c
                .devices
                .iter()
                .flat_map(|d| d.device_ids.iter().map(|id| format!("{}/{id}", d.resource)))
                .collect();
            (
                c.name.clone(),
                (c.cpuset.clone(), c.exclusive_cpus, devices),
            )
        })
        .collect()
}

#[derive(Default)]
struct Model {
    /// Acknowledged admitted, not acknowledged released.
    admitted: BTreeMap<String, Held>,
    /// Sent, never answered: may or may not be admitted.
    maybe_admitted: BTreeSet<String>,
    /// Release sent, never answered: may or may not be gone.
    maybe_released: BTreeSet<String>,
    acknowledged_admissions: usize,
    acknowledged_releases: usize,
}

/// A running `corral run` (killed and reaped on drop) and its log file.
struct Agent {
    child: Reaped,
    log: PathBuf,
}

fn spawn(root: &Path) -> Agent {
    let log = root.with_extension("log");
    let child = corral_run(
        root,
        &[
            "--cpu-manager-policy",
            "static",
            "--reserved-system-cpus",
            "0",
            "--topology-manager-policy",
            "best-effort",
            "--demo-devices",
            "4",
        ],
        log_file(&log),
    );
    Agent {
        child: Reaped(child),
        log,
    }
}

/// Every admitted pod, as the agent reports it.
async fn list_pods(client: &AgentClient<corral_proto::uds::Channel>) -> Vec<api::PodAllocation> {
    let mut client = client.clone();
    let request = client.list_pods(api::ListPodsRequest {});
    request.await.unwrap().into_inner().pods
}

/// Start the agent and wait until it answers; `Err(log)` when it exits instead.
async fn start(root: &Path) -> Result<(Agent, AgentClient<corral_proto::uds::Channel>), String> {
    let mut agent = spawn(root);
    let socket = root.join("corral/agent.sock");
    let deadline = Instant::now() + WAIT;
    loop {
        if agent.child.0.try_wait().unwrap().is_some() {
            return Err(std::fs::read_to_string(&agent.log).unwrap_or_default());
        }
        if let Ok(channel) = corral_proto::uds::connect(&socket, Duration::from_secs(1)).await {
            let mut client = AgentClient::new(channel);
            if tokio::time::timeout(RPC, client.list_pods(api::ListPodsRequest {}))
                .await
                .is_ok_and(|r| r.is_ok())
            {
                return Ok((agent, client));
            }
        }
        assert!(Instant::now() < deadline, "agent never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pod_json(uid: &str, cpus: u64, gpus: u64) -> Vec<u8> {
    let mut limits = serde_json::json!({"cpu": cpus.to_string(), "memory": "64Mi"});
    if gpus > 0 {
        limits["example.com/gpu"] = gpus.to_string().into();
    }
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "chaos", "uid": uid},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }))
    .unwrap()
}

/// One client: admit and release until `stop`, recording what was acknowledged.
async fn worker(
    mut client: AgentClient<corral_proto::uds::Channel>,
    model: Arc<Mutex<Model>>,
    seed: u64,
    worker: usize,
    round: usize,
) {
    let mut rng = Rng(seed ^ ((round as u64) << 16) ^ worker as u64 | 1);
    for i in 0.. {
        let release = {
            let model = model.lock().unwrap();
            let mine: Vec<&String> = model
                .admitted
                .keys()
                .filter(|uid| uid.starts_with(&format!("w{worker}-")))
                .collect();
            (!mine.is_empty() && (mine.len() >= 3 || rng.below(100) < 40))
                .then(|| mine[rng.below(mine.len() as u64) as usize].clone())
        };
        if let Some(uid) = release {
            model.lock().unwrap().maybe_released.insert(uid.clone());
            let call = client.pod_removed(api::PodRemovedRequest {
                pod_uid: uid.clone(),
            });
            match tokio::time::timeout(RPC, call).await {
                Ok(Ok(_)) => {
                    let mut model = model.lock().unwrap();
                    model.maybe_released.remove(&uid);
                    model.admitted.remove(&uid);
                    model.acknowledged_releases += 1;
                }
                _ => return, // killed: the outcome is unknown
            }
        } else {
            let uid = format!("w{worker}-r{round}-{i}");
            let (cpus, gpus) = (1 + rng.below(2), u64::from(rng.below(100) < 30));
            model.lock().unwrap().maybe_admitted.insert(uid.clone());
            let call = client.admit(api::AdmitRequest {
                pod_json: pod_json(&uid, cpus, gpus),
                resource_claims_json: Vec::new(),
                resource_slices_json: Vec::new(),
                ..Default::default()
            });
            match tokio::time::timeout(RPC, call).await {
                Ok(Ok(answer)) => {
                    let answer = answer.into_inner();
                    let mut model = model.lock().unwrap();
                    model.maybe_admitted.remove(&uid);
                    if answer.admitted {
                        let pod = answer.allocation.expect("an admitted pod's allocation");
                        model.admitted.insert(uid, held(&pod));
                        model.acknowledged_admissions += 1;
                    }
                }
                _ => return,
            }
        }
    }
}

/// Compare what the restarted agent holds with the model, check the invariants, and make
/// the model what the agent holds (resolving the unanswered calls).
fn check(model: &mut Model, pods: &[api::PodAllocation]) {
    let present: BTreeMap<&str, &api::PodAllocation> =
        pods.iter().map(|p| (p.uid.as_str(), p)).collect();
    for (uid, expected) in &model.admitted {
        match present.get(uid.as_str()) {
            Some(pod) => assert_eq!(&held(pod), expected, "pod {uid} changed across a kill"),
            None => assert!(
                model.maybe_released.contains(uid),
                "acknowledged pod {uid} was lost"
            ),
        }
    }
    for uid in present.keys() {
        assert!(
            model.admitted.contains_key(*uid) || model.maybe_admitted.contains(*uid),
            "pod {uid} was never admitted"
        );
    }
    let mut cpu_owner: BTreeMap<u32, String> = BTreeMap::new();
    let mut device_owner: BTreeMap<String, String> = BTreeMap::new();
    let mut shared: BTreeSet<u32> = BTreeSet::new();
    for pod in pods {
        for c in &pod.containers {
            let owner = format!("{}/{}", pod.uid, c.name);
            if c.exclusive_cpus {
                for cpu in cpus(&c.cpuset) {
                    if let Some(other) = cpu_owner.insert(cpu, owner.clone()) {
                        panic!("CPU {cpu} exclusive to {other} and {owner}");
                    }
                }
            } else {
                shared.extend(cpus(&c.cpuset));
            }
            for d in &c.devices {
                for id in &d.device_ids {
                    if let Some(other) = device_owner.insert(id.clone(), owner.clone()) {
                        panic!("device {id} held by {other} and {owner}");
                    }
                }
            }
        }
    }
    for cpu in cpu_owner.keys() {
        assert!(
            !shared.contains(cpu),
            "exclusive CPU {cpu} in the shared pool"
        );
    }
    model.admitted = pods.iter().map(|p| (p.uid.clone(), held(p))).collect();
    model.maybe_admitted.clear();
    model.maybe_released.clear();
}

fn cpus(list: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

/// Whether any pod file under `root` records holdings of the given kind.
fn recorded(root: &Path, key: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(root.join("corral/pods")) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.path().extension().is_some_and(|x| x == "json")
            && std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| {
                    // `{"record": …, "checksum": …}`
                    v["record"]["holdings"]
                        .as_object()
                        .is_some_and(|h| h.values().any(|c| c.get(key).is_some()))
                })
    })
}

/// Temp files under `dir` not of the live agent `pid` (whose own write may be in flight,
/// e.g. the device checkpoint when the demo plugin registers): leftovers of dead writers.
/// The journal's `.journal-apply.tmp` is the live agent's too (a commit renames through
/// it; opening the journal removes one a dead agent left, before this runs).
fn temp_files(dir: &Path, pid: u32, found: &mut Vec<PathBuf>) {
    let live = format!(".tmp.{pid}.");
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            temp_files(&path, pid, found);
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains(".tmp") && !n.contains(&live) && n != ".journal-apply.tmp")
        {
            found.push(path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_parallel_admissions_loses_and_duplicates_nothing() {
    let kills: usize = std::env::var("CORRAL_CHAOS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("CORRAL_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c0de);
    eprintln!("chaos: {kills} kills, seed {seed}");
    let dir = tempfile::tempdir().unwrap();
    let mut root = dir.path().join("root");
    let (mut moved_roots, mut journal_refused, mut journal_accepted) = (0, 0, 0);
    let model = Arc::new(Mutex::new(Model::default()));
    let mut rng = Rng(seed | 1);
    let mut refused = 0;
    let mut restored = 0;
    for round in 0..kills {
        let (agent, client) = start(&root).await.expect("the agent starts");
        let pods = list_pods(&client).await;
        check(&mut model.lock().unwrap(), &pods);
        let mut leftovers = Vec::new();
        temp_files(&root, agent.child.0.id(), &mut leftovers);
        assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
        let acknowledged = model.lock().unwrap().acknowledged_admissions;
        let workers: Vec<_> = (0..4)
            .map(|w| tokio::spawn(worker(client.clone(), Arc::clone(&model), seed, w, round)))
            .collect();
        tokio::time::sleep(Duration::from_millis(100 + rng.below(250))).await;
        // Never a round without traffic, however few calls the delay leaves room for on a
        // busy machine: the kill waits for at least one acknowledged admission.
        let deadline = Instant::now() + WAIT;
        while model.lock().unwrap().acknowledged_admissions == acknowledged {
            assert!(
                Instant::now() < deadline,
                "no admission acknowledged in round {round}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(agent); // SIGKILL, reaped
        for w in workers {
            tokio::time::timeout(WAIT, w)
                .await
                .expect("a client hung after the kill")
                .unwrap();
        }
        // Every sixth restart: the root moves (a changed mount point); the replay must
        // serve every acknowledged pod from the new place.
        if round % 6 == 5 {
            let moved = dir.path().join(format!("root-{round}"));
            std::fs::rename(&root, &moved).unwrap();
            let old = std::mem::replace(&mut root, moved);
            let (agent, client) = start(&root)
                .await
                .expect("the agent starts in its new place");
            let pods = list_pods(&client).await;
            check(&mut model.lock().unwrap(), &pods);
            drop(agent);
            assert!(
                !old.exists(),
                "the replay wrote to the old root {}",
                old.display()
            );
            moved_roots += 1;
        }
        // Every seventh restart: damage the journal (a flipped byte or a cut anywhere). The
        // agent refuses to start naming it, or — damage only in the tail a kill left of a
        // commit never answered — starts holding exactly what was acknowledged.
        if round % 7 == 6 {
            let journal = root.join("corral/state.journal");
            let backup = std::fs::read(&journal).unwrap();
            let mut damaged = backup.clone();
            let at = rng.below(backup.len() as u64) as usize;
            if rng.below(2) == 0 {
                damaged[at] ^= 1 << rng.below(8);
            } else {
                damaged.truncate(at);
            }
            std::fs::write(&journal, &damaged).unwrap();
            match start(&root).await {
                Err(log) => {
                    assert!(
                        log.contains("state.journal"),
                        "the refusal names the journal: {log}"
                    );
                    assert!(
                        log.contains("move the journal"),
                        "the refusal gives the remedy: {log}"
                    );
                    journal_refused += 1;
                }
                Ok((agent, client)) => {
                    let pods = list_pods(&client).await;
                    check(&mut model.lock().unwrap(), &pods);
                    drop(agent);
                    journal_accepted += 1;
                }
            }
            // The start that refused left the journal as it was: put the original back
            // (a start that accepted it replaced it with a snapshot already).
            if std::fs::read(&journal).unwrap() == damaged {
                std::fs::write(&journal, &backup).unwrap();
            }
        }
        // Every fifth restart: lose or truncate a state file.
        if round % 5 == 4 {
            let (file, key) = if rng.below(2) == 0 {
                (root.join("cpu_manager_state"), "exclusiveCpus")
            } else {
                (
                    root.join("device-plugins/kubelet_internal_checkpoint"),
                    "devices",
                )
            };
            let Ok(backup) = std::fs::read(&file) else {
                continue;
            };
            let truncate = rng.below(2) == 0;
            if truncate {
                std::fs::write(&file, &backup[..backup.len() / 2]).unwrap();
            } else {
                std::fs::remove_file(&file).unwrap();
            }
            if round % 10 == 4 {
                // The journal has the file: it is restored and the agent starts; the next
                // round checks it holds what was acknowledged.
                let (agent, client) = start(&root).await.expect("restored from the journal");
                let pods = list_pods(&client).await;
                check(&mut model.lock().unwrap(), &pods);
                assert!(file.exists(), "{} was not restored", file.display());
                drop(agent);
                restored += 1;
                continue;
            }
            // Losing the journal too: from files a replay made whole (a kill during a
            // commit may leave one file renamed and the next not yet, which only the
            // journal repairs), so restart once, idle, and kill again.
            std::fs::write(&file, &backup).unwrap();
            let (agent, _client) = start(&root).await.expect("the agent starts");
            drop(agent);
            let Ok(backup) = std::fs::read(&file) else {
                continue;
            };
            if truncate {
                std::fs::write(&file, &backup[..backup.len() / 2]).unwrap();
            } else {
                std::fs::remove_file(&file).unwrap();
            }
            std::fs::remove_file(root.join("corral/state.journal")).unwrap();
            let must_refuse = truncate || recorded(&root, key);
            match start(&root).await {
                Err(log) => {
                    assert!(must_refuse, "refused without reason: {log}");
                    let name = file.file_name().unwrap().to_str().unwrap();
                    assert!(log.contains(name), "the refusal names {name}: {log}");
                    refused += 1;
                }
                Ok(_) => assert!(!must_refuse, "started without {}", file.display()),
            }
            std::fs::write(&file, &backup).unwrap();
        }
    }
    let (_agent, client) = start(&root).await.expect("the agent starts");
    let pods = list_pods(&client).await;
    let mut model = model.lock().unwrap();
    check(&mut model, &pods);
    eprintln!(
        "chaos: {kills} kills, {} acknowledged admissions, {} acknowledged releases, {restored} damaged files restored from the journal, {refused} damaged restarts without it refused, {moved_roots} root moves, {journal_refused} damaged journals refused and {journal_accepted} accepted (a torn unanswered tail), 0 lost, 0 double-assigned",
        model.acknowledged_admissions, model.acknowledged_releases
    );
    assert!(moved_roots >= kills / 7, "too few root moves");
    assert!(
        journal_refused >= kills / 14,
        "too few damaged journals refused"
    );
    assert!(model.acknowledged_admissions >= kills, "too little traffic");
    assert!(refused >= kills / 20, "too few damaged restarts refused");
    assert!(restored >= kills / 20, "too few damaged files restored");
}

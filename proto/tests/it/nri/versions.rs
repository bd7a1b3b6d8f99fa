//! Runtimes of NRI v0.8 and v0.12 (corral's runtime end, each configuring as that release
//! does) against a plugin that handles v0.10's events: the v0.8 runtime keeps it (the
//! subscription is cut to what it knows) where an uncut subscription is dropped as upstream
//! drops it; the v0.12 runtime gets `UpdatePodSandbox`, `ValidateContainerAdjustment` and
//! the dedicated event RPCs, and every field v0.10–v0.12 added round-trips.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::plugin::{NriPlugin, PluginConfig, PluginStub};
use corral_proto::nri::runtime::{IgnoreUpdates, PluginConnection};
use corral_proto::nri::{NriError, NriStatus};
use tokio::net::UnixListener;

/// Upper bound of every wait: what the tests wait for happens far sooner.
const WAIT: Duration = Duration::from_secs(60);

/// Subscribes to `wanted`; records what reaches it; rejects an adjustment that sets
/// `cpus` to "0".
struct Recorder {
    wanted: EventMask,
    seen: Arc<Mutex<Vec<String>>>,
    validated: Arc<Mutex<Vec<api::ValidateContainerAdjustmentRequest>>>,
}

impl Recorder {
    fn new(wanted: &[Event]) -> Self {
        Recorder {
            wanted: EventMask::of(wanted),
            seen: Arc::default(),
            validated: Arc::default(),
        }
    }
}

#[tonic::async_trait]
impl NriPlugin for Recorder {
    async fn configure(&self, _: api::ConfigureRequest) -> Result<EventMask, NriStatus> {
        Ok(self.wanted)
    }

    async fn update_pod_sandbox(
        &self,
        request: api::UpdatePodSandboxRequest,
    ) -> Result<(), NriStatus> {
        let pod = request.pod.unwrap_or_default();
        let shares = request
            .linux_resources
            .and_then(|r| r.cpu)
            .and_then(|c| c.shares)
            .map_or(0, |s| s.value);
        let mut seen = self.seen.lock().unwrap();
        seen.push(format!("UpdatePodSandbox {} {shares}", pod.uid));
        Ok(())
    }

    async fn validate_container_adjustment(
        &self,
        request: api::ValidateContainerAdjustmentRequest,
    ) -> Result<api::ValidateContainerAdjustmentResponse, NriStatus> {
        let cpus = request
            .adjust
            .as_ref()
            .and_then(|a| a.linux.as_ref())
            .and_then(|l| l.resources.as_ref())
            .and_then(|r| r.cpu.as_ref())
            .map(|c| c.cpus.clone())
            .unwrap_or_default();
        self.validated.lock().unwrap().push(request);
        Ok(api::ValidateContainerAdjustmentResponse {
            reject: cpus == "0",
            reason: if cpus == "0" {
                "cpu 0 is taken".into()
            } else {
                String::new()
            },
        })
    }

    async fn state_change(&self, event: api::StateChangeEvent) -> Result<(), NriStatus> {
        let kind = event.event();
        let pod = event.pod.map(|p| p.uid).unwrap_or_default();
        let container = event.container.map(|c| c.id).unwrap_or_default();
        self.seen
            .lock()
            .unwrap()
            .push(format!("{kind:?} {pod} {container}"));
        Ok(())
    }
}

/// A registered plugin serving `plugin`, and the runtime's connection to it.
struct Pair {
    conn: PluginConnection,
    plugin: tokio::task::JoinHandle<Result<(), NriError>>,
    _dir: tempfile::TempDir,
}

async fn pair(plugin: Recorder) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let mut config = PluginConfig::new("corral", "10").unwrap();
    config.socket = socket;
    let stub = PluginStub::connect(config).await.unwrap();
    let plugin = tokio::spawn(stub.run(plugin));
    let mut conn = PluginConnection::next(&listener, Arc::new(IgnoreUpdates), WAIT)
        .await
        .unwrap();
    conn.registration(WAIT).await.unwrap();
    Pair {
        conn,
        plugin,
        _dir: dir,
    }
}

const V0_10_EVENTS: &[Event] = &[
    Event::CreateContainer,
    Event::RemoveContainer,
    Event::UpdatePodSandbox,
    Event::ValidateContainerAdjustment,
];

/// What containerd 2.0 (NRI v0.8) sends: no `NRI_version`.
fn containerd_2_0() -> api::ConfigureRequest {
    api::ConfigureRequest {
        runtime_name: "containerd".into(),
        runtime_version: "v2.0.5".into(),
        request_timeout: 60_000,
        ..Default::default()
    }
}

fn v0_12_runtime() -> api::ConfigureRequest {
    api::ConfigureRequest {
        runtime_name: "corral-test-runtime".into(),
        runtime_version: "0.1.0".into(),
        request_timeout: 60_000,
        nri_version: "v0.12.2".into(),
        ..Default::default()
    }
}

fn pod(uid: &str) -> api::PodSandbox {
    api::PodSandbox {
        id: format!("sandbox-{uid}"),
        uid: uid.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_8_runtime_keeps_the_plugin_subscribed_to_what_it_knows() {
    let Pair { conn, plugin, _dir } = pair(Recorder::new(V0_10_EVENTS)).await;
    let events = conn
        .configure(&containerd_2_0(), EventMask::V0_8)
        .await
        .expect("a v0.8 runtime accepts the subscription");
    assert_eq!(
        events,
        EventMask::of(&[Event::CreateContainer, Event::RemoveContainer])
    );
    // The plugin still serves the v0.8 events.
    let removed = api::StateChangeEvent {
        event: Event::RemoveContainer as i32,
        pod: Some(pod("p")),
        container: Some(api::Container {
            id: "c".into(),
            ..Default::default()
        }),
    };
    let _: api::Empty = conn.call("StateChange", &removed).await.unwrap();
    conn.close();
    tokio::time::timeout(WAIT, plugin)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Why the subscription is cut: a runtime refuses events past its own `LAST` and drops
/// the plugin (upstream `plugin.configure`, "invalid plugin events"). Here the runtime
/// claims v0.12 in `NRI_version` but knows only v0.8's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_drops_a_plugin_subscribed_to_events_it_does_not_know() {
    let Pair { conn, plugin, _dir } = pair(Recorder::new(V0_10_EVENTS)).await;
    let err = conn
        .configure(&v0_12_runtime(), EventMask::V0_8)
        .await
        .unwrap_err();
    let bits = EventMask::of(&[Event::UpdatePodSandbox, Event::ValidateContainerAdjustment]);
    assert_eq!(
        err.to_string(),
        format!(
            "NRI protocol violation: invalid plugin events: {:#x}",
            bits.bits()
        )
    );
    // Dropped: the plugin's run ends with the connection.
    tokio::time::timeout(WAIT, plugin)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_wants_only_newer_events_is_refused_by_an_older_runtime() {
    let wanted = [Event::ValidateContainerAdjustment];
    let Pair { conn, plugin, _dir } = pair(Recorder::new(&wanted)).await;
    let err = conn
        .configure(&containerd_2_0(), EventMask::V0_8)
        .await
        .unwrap_err();
    let NriError::Status { source: status, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(status.code, NriStatus::FAILED_PRECONDITION, "{status}");
    assert!(
        status.message.contains("knows none of the events"),
        "{status}"
    );
    conn.close();
    tokio::time::timeout(WAIT, plugin)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_12_runtime_sends_pod_updates_validations_and_dedicated_events() {
    let recorder = Recorder::new(V0_10_EVENTS);
    let (seen, validated) = (Arc::clone(&recorder.seen), Arc::clone(&recorder.validated));
    let Pair { conn, plugin, _dir } = pair(recorder).await;
    let events = conn
        .configure(&v0_12_runtime(), EventMask::V0_10)
        .await
        .unwrap();
    assert_eq!(events, EventMask::of(V0_10_EVENTS));

    let update = api::UpdatePodSandboxRequest {
        pod: Some(pod("p1")),
        overhead_linux_resources: None,
        linux_resources: Some(api::LinuxResources {
            cpu: Some(api::LinuxCpu {
                shares: Some(api::OptionalUInt64 { value: 2048 }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    let _: api::UpdatePodSandboxResponse = conn.call("UpdatePodSandbox", &update).await.unwrap();

    let removed = api::RemoveContainerRequest {
        pod: Some(pod("p1")),
        container: Some(api::Container {
            id: "c1".into(),
            ..Default::default()
        }),
    };
    let _: api::RemoveContainerResponse = conn.call("RemoveContainer", &removed).await.unwrap();
    let run = api::RunPodSandboxRequest {
        pod: Some(pod("p2")),
    };
    let _: api::RunPodSandboxResponse = conn.call("RunPodSandbox", &run).await.unwrap();

    let validate = |cpus: &str| validation("c2", cpus);
    let accepted: api::ValidateContainerAdjustmentResponse = conn
        .call("ValidateContainerAdjustment", &validate("2-3"))
        .await
        .unwrap();
    assert_eq!(
        accepted,
        api::ValidateContainerAdjustmentResponse::default()
    );
    let rejected: api::ValidateContainerAdjustmentResponse = conn
        .call("ValidateContainerAdjustment", &validate("0"))
        .await
        .unwrap();
    assert!(rejected.reject);
    assert_eq!(rejected.reason, "cpu 0 is taken");

    assert_eq!(
        *seen.lock().unwrap(),
        [
            "UpdatePodSandbox p1 2048",
            "RemoveContainer p1 c1",
            "RunPodSandbox p2 ",
        ]
    );
    // Every field v0.10–v0.12 added reached the plugin as sent.
    assert_eq!(validated.lock().unwrap()[0], validate("2-3"));
    conn.close();
    tokio::time::timeout(WAIT, plugin)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A validation of container `id`'s adjustment to `cpus`, with a field of each kind v0.10
/// to v0.12 added set.
fn validation(id: &str, cpus: &str) -> api::ValidateContainerAdjustmentRequest {
    let resources = api::LinuxResources {
        cpu: Some(api::LinuxCpu {
            cpus: cpus.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let linux = api::LinuxContainerAdjustment {
        resources: Some(resources.clone()),
        io_priority: Some(api::LinuxIoPriority {
            class: api::IoPrioClass::IoprioClassBe as i32,
            priority: 4,
        }),
        sysctl: HashMap::from([("net.core.somaxconn".into(), "1024".into())]),
        scheduler: Some(api::LinuxScheduler {
            policy: api::LinuxSchedulerPolicy::SchedFifo as i32,
            priority: 10,
            flags: vec![api::LinuxSchedulerFlag::SchedFlagResetOnFork as i32],
            ..Default::default()
        }),
        rdt: Some(api::LinuxRdt {
            clos_id: Some(api::OptionalString {
                value: "gold".into(),
            }),
            schemata: Some(api::OptionalRepeatedString {
                value: vec!["L3:0=f".into()],
            }),
            ..Default::default()
        }),
        memory_policy: Some(api::LinuxMemoryPolicy {
            mode: api::MpolMode::MpolBind as i32,
            nodes: "0".into(),
            flags: vec![api::MpolFlag::MpolFStaticNodes as i32],
        }),
        ..Default::default()
    };
    let owners = api::FieldOwners {
        simple: HashMap::from([(api::Field::CpuSetCpUs as i32, "10-corral".into())]),
        compound: HashMap::new(),
    };
    api::ValidateContainerAdjustmentRequest {
        pod: Some(pod("p2")),
        container: Some(api::Container {
            id: id.into(),
            user: Some(api::User {
                uid: 1000,
                gid: 1000,
                additional_gids: vec![4],
            }),
            image: Some(api::Image {
                name: "registry.k8s.io/pause:3.10".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        adjust: Some(api::ContainerAdjustment {
            linux: Some(linux),
            args: vec!["sleep".into()],
            ..Default::default()
        }),
        update: vec![api::ContainerUpdate {
            container_id: "c1".into(),
            linux: Some(api::LinuxContainerUpdate {
                resources: Some(resources),
            }),
            ignore_failure: false,
        }],
        owners: Some(api::OwningPlugins {
            owners: HashMap::from([(id.to_owned(), owners)]),
        }),
        plugins: vec![api::PluginInstance {
            name: "corral".into(),
            index: "10".into(),
        }],
    }
}

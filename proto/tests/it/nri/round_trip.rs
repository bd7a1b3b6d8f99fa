//! A plugin (corral's [`PluginStub`]) and a runtime (corral's [`PluginConnection`]) on a
//! unix socket in a temp dir: every Plugin method and the Runtime service both ways.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::decode_cost::{TOP_LEVEL, decode_cost};
use corral_proto::nri::plugin::{MAX_SYNC_BYTES, NriPlugin, PluginConfig, PluginStub};
use corral_proto::nri::runtime::{PluginConnection, UpdateHandler};
use corral_proto::nri::{NriError, NriStatus};
use prost::Message;
use tokio::net::UnixListener;

/// Upper bound of every wait (and the runtime's request timeout): what the tests wait for
/// happens far sooner, also on a busy machine.
const WAIT: Duration = Duration::from_secs(60);

/// Pins every container to CPUs 2-3, refuses containers named "refused", records events.
#[derive(Default)]
struct Pinner {
    events: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl NriPlugin for Pinner {
    async fn configure(&self, request: api::ConfigureRequest) -> Result<EventMask, NriStatus> {
        self.events
            .lock()
            .unwrap()
            .push(format!("configure {}", request.runtime_name));
        Ok(EventMask::of(&[
            Event::CreateContainer,
            Event::RemoveContainer,
        ]))
    }

    async fn synchronize(
        &self,
        request: api::SynchronizeRequest,
    ) -> Result<api::SynchronizeResponse, NriStatus> {
        let update = request
            .containers
            .iter()
            .map(|c| cpuset_update(&c.id, "0-1"))
            .collect();
        Ok(api::SynchronizeResponse {
            update,
            more: false,
        })
    }

    async fn create_container(
        &self,
        request: api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, NriStatus> {
        let container = request.container.unwrap_or_default();
        if container.name == "refused" {
            return Err(NriStatus::new(NriStatus::UNKNOWN, "TopologyAffinityError"));
        }
        let resources = api::LinuxResources {
            cpu: Some(api::LinuxCpu {
                cpus: "2-3".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let adjust = api::ContainerAdjustment {
            linux: Some(api::LinuxContainerAdjustment {
                resources: Some(resources),
                ..Default::default()
            }),
            ..Default::default()
        };
        Ok(api::CreateContainerResponse {
            adjust: Some(adjust),
            ..Default::default()
        })
    }

    async fn state_change(&self, event: api::StateChangeEvent) -> Result<(), NriStatus> {
        let kind = event.event();
        let id = event.container.map(|c| c.id).unwrap_or_default();
        self.events.lock().unwrap().push(format!("{kind:?} {id}"));
        Ok(())
    }
}

fn cpuset_update(id: &str, cpus: &str) -> api::ContainerUpdate {
    let resources = api::LinuxResources {
        cpu: Some(api::LinuxCpu {
            cpus: cpus.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    api::ContainerUpdate {
        container_id: id.into(),
        linux: Some(api::LinuxContainerUpdate {
            resources: Some(resources),
        }),
        ignore_failure: false,
    }
}

/// Records the updates a plugin asks for; fails none.
#[derive(Default)]
struct RecordingRuntime {
    updates: Mutex<Vec<api::UpdateContainersRequest>>,
}

#[tonic::async_trait]
impl UpdateHandler for RecordingRuntime {
    async fn update_containers(
        &self,
        request: api::UpdateContainersRequest,
    ) -> Result<api::UpdateContainersResponse, NriStatus> {
        self.updates.lock().unwrap().push(request);
        Ok(api::UpdateContainersResponse::default())
    }
}

fn container(id: &str, name: &str) -> api::Container {
    api::Container {
        id: id.into(),
        name: name.into(),
        ..Default::default()
    }
}

fn cpus(response: &api::CreateContainerResponse) -> &str {
    let adjust = response.adjust.as_ref().unwrap();
    let resources = adjust.linux.as_ref().unwrap().resources.as_ref().unwrap();
    &resources.cpu.as_ref().unwrap().cpus
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_registers_is_configured_synchronized_and_answers_events() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let mut config = PluginConfig::new("corral", "10").unwrap();
    config.socket = socket.clone();
    let stub = PluginStub::connect(config).await.unwrap();
    let runtime_client = stub.runtime();
    let pinner = Pinner::default();
    let events = Arc::clone(&pinner.events);
    let plugin = tokio::spawn(stub.run(pinner));

    let (trunk, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .unwrap()
        .unwrap();
    let runtime = Arc::new(RecordingRuntime::default());
    let updates: Arc<dyn UpdateHandler> = Arc::clone(&runtime) as _;
    let mut conn = PluginConnection::accept(trunk, updates, WAIT).unwrap();
    let registered = conn.registration(WAIT).await.unwrap();
    assert_eq!(
        (
            registered.plugin_name.as_str(),
            registered.plugin_idx.as_str()
        ),
        ("corral", "10")
    );

    let configure = api::ConfigureRequest {
        runtime_name: "test-runtime".into(),
        // Milliseconds; long enough for every call below on a busy machine.
        request_timeout: 60_000,
        ..Default::default()
    };
    let configured: api::ConfigureResponse = conn.call("Configure", &configure).await.unwrap();
    let mask = EventMask::from_bits(configured.events);
    // The runtime's request timeout (milliseconds) is what the plugin's calls use now.
    assert_eq!(
        runtime_client.request_timeout(),
        Duration::from_millis(60_000)
    );
    assert!(mask.contains(Event::CreateContainer) && mask.contains(Event::RemoveContainer));
    assert!(!mask.contains(Event::StopContainer));

    let sync = api::SynchronizeRequest {
        containers: vec![container("c0", "old")],
        ..Default::default()
    };
    let synced: api::SynchronizeResponse = conn.call("Synchronize", &sync).await.unwrap();
    assert_eq!(synced.update, [cpuset_update("c0", "0-1")]);

    // A synchronization in two parts reaches the plugin whole.
    let first = api::SynchronizeRequest {
        containers: vec![container("c5", "part-1")],
        more: true,
        ..Default::default()
    };
    let partial: api::SynchronizeResponse = conn.call("Synchronize", &first).await.unwrap();
    assert!(partial.more && partial.update.is_empty());
    let last = api::SynchronizeRequest {
        containers: vec![container("c6", "part-2")],
        ..Default::default()
    };
    let whole: api::SynchronizeResponse = conn.call("Synchronize", &last).await.unwrap();
    assert_eq!(
        whole.update,
        [cpuset_update("c5", "0-1"), cpuset_update("c6", "0-1")]
    );

    // Requests that would decode to far more than their bytes are refused undecoded: one
    // part of a million empty pods (2 MB on the wire, 1.5 GB decoded), and a split
    // synchronization whose parts together would pass MAX_SYNC_BYTES; the parts collected
    // so far are forgotten, and the next synchronization is served whole.
    let exhausted = |err: NriError| match err {
        NriError::Status { source, .. } => {
            assert_eq!(source.code, NriStatus::RESOURCE_EXHAUSTED, "{source:?}");
            assert!(source.message.contains("decoded"), "{source:?}");
        }
        other => panic!("expected ResourceExhausted, got {other:?}"),
    };
    let empty_pods = |n| api::SynchronizeRequest {
        pods: vec![api::PodSandbox::default(); n],
        containers: Vec::new(),
        more: true,
    };
    exhausted(
        conn.call::<_, api::SynchronizeResponse>("Synchronize", &empty_pods(1_000_000))
            .await
            .unwrap_err(),
    );
    let part = empty_pods(17_000);
    assert!(decode_cost(&part.encode_to_vec(), TOP_LEVEL) * 2 > MAX_SYNC_BYTES);
    let partial: api::SynchronizeResponse = conn.call("Synchronize", &part).await.unwrap();
    assert!(partial.more);
    exhausted(
        conn.call::<_, api::SynchronizeResponse>("Synchronize", &part)
            .await
            .unwrap_err(),
    );
    let whole: api::SynchronizeResponse = conn.call("Synchronize", &last).await.unwrap();
    assert_eq!(whole.update, [cpuset_update("c6", "0-1")]);

    let create = api::CreateContainerRequest {
        pod: Some(api::PodSandbox::default()),
        container: Some(container("c1", "app")),
    };
    let created: api::CreateContainerResponse =
        conn.call("CreateContainer", &create).await.unwrap();
    assert_eq!(cpus(&created), "2-3");

    // The plugin's error fails the runtime's request with its status.
    let refused = api::CreateContainerRequest {
        pod: None,
        container: Some(container("c2", "refused")),
    };
    let err = conn
        .call::<_, api::CreateContainerResponse>("CreateContainer", &refused)
        .await
        .unwrap_err();
    match err {
        NriError::Status { source, .. } => assert_eq!(source.message, "TopologyAffinityError"),
        other => panic!("expected a status, got {other:?}"),
    }

    let removed = api::StateChangeEvent {
        event: Event::RemoveContainer as i32,
        pod: None,
        container: Some(container("c1", "app")),
    };
    let _: api::Empty = conn.call("StateChange", &removed).await.unwrap();
    // Methods the plugin does not implement answer their defaults.
    let stop = api::StopContainerRequest::default();
    let stopped: api::StopContainerResponse = conn.call("StopContainer", &stop).await.unwrap();
    assert!(stopped.update.is_empty());

    // The other direction: an unsolicited update from the plugin reaches the runtime.
    let update = api::UpdateContainersRequest {
        update: vec![cpuset_update("c3", "4-7")],
        evict: vec![],
    };
    runtime_client.update_containers(&update).await.unwrap();
    assert_eq!(runtime.updates.lock().unwrap().as_slice(), [update]);

    assert_eq!(
        events.lock().unwrap().as_slice(),
        ["configure test-runtime", "RemoveContainer c1"]
    );
    // The runtime goes away: the plugin's run ends cleanly.
    conn.close();
    let ended = tokio::time::timeout(WAIT, plugin).await.unwrap().unwrap();
    assert!(ended.is_ok(), "{ended:?}");
}

// The registration timeout is the feature: a runtime that never answers fails `run` once
// it passes. The test waits for that (at most `WAIT`, 300 times the timeout) and asserts
// only that it happened, never how soon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_never_answers_registration_fails_run_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let mut config = PluginConfig::new("corral", "10").unwrap();
    config.socket = socket;
    config.registration_timeout = Duration::from_millis(200);
    let stub = PluginStub::connect(config).await.unwrap();
    // Accepted, never read: RegisterPlugin gets no answer.
    let (_trunk, _) = listener.accept().await.unwrap();
    let err = tokio::time::timeout(WAIT, stub.run(Pinner::default()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, NriError::Timeout { ref method, .. } if method == "RegisterPlugin"),
        "{err}"
    );
}

#[tokio::test]
async fn connecting_to_a_missing_socket_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = PluginConfig::new("corral", "10").unwrap();
    config.socket = dir.path().join("absent.sock");
    let err = PluginStub::connect(config).await.unwrap_err();
    assert!(err.to_string().contains("absent.sock"), "{err}");
}

#[test]
fn plugin_names_and_indexes_are_checked() {
    for index in ["1", "100", "ab", "", "1a"] {
        let err = PluginConfig::new("corral", index).unwrap_err();
        assert!(
            err.to_string().contains("two decimal digits"),
            "{index}: {err}"
        );
    }
    for name in ["", "a/b"] {
        assert!(PluginConfig::new(name, "10").is_err(), "{name:?}");
    }
    assert_eq!(PluginConfig::new("corral", "05").unwrap().index, "05");
}

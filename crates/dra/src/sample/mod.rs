//! A sample DRA driver ([`SampleDriver`]) for tests and the `sample_dra_driver` example:
//! it registers through a registration directory, prepares fake devices into CDI ids
//! (`<cdi kind>=claim-<uid>` unless given an allocation), and can be told to fail, hang
//! or restart.
//!
//! It serves pluginregistration v1 on `<registry dir>/<driver>-reg.sock` and DRAPlugin
//! (v1 and/or v1beta1, as it advertises) on `<plugin dir>/dra.sock`, as drivers built on
//! upstream's `kubeletplugin` helper do; as one instance of a rolling update
//! ([`SampleDriverConfig::rolling_update`], the helper's `RollingUpdate(podUID)`) on
//! `<driver>-<pod uid>-reg.sock` and `dra-<pod uid>.sock`. Its devices carry share ids
//! when told to ([`ShareIds`]). It serves the DRAResourceHealth versions it lists
//! (`v1.DRAResourceHealth`, `v1alpha1.DRAResourceHealth`) and streams what
//! [`SampleDriver::set_health`] last set.

mod control;
mod health;
mod service;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use corral_proto::dra::{v1, v1beta1};
use corral_proto::pluginregistration::v1 as reg;
use corral_proto::tonic::transport::Server;
use corral_proto::uds::{self, SocketOptions, UdsError, UdsListener};
use tokio_util::sync::CancellationToken;

pub use control::{Behavior, Call, FakeAllocation, ShareIds};
use control::{Control, locked};
pub use health::SampleDeviceHealth;

use crate::claim_info::PreparedDevice;

/// How long in-flight calls get when the driver stops.
const GRACE: Duration = Duration::from_millis(500);

/// Sample driver settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleDriverConfig {
    /// The driver name it registers as.
    pub driver_name: String,
    /// The registration directory it puts its registration socket in.
    pub registry_dir: PathBuf,
    /// The directory of its DRAPlugin socket (`dra.sock`).
    pub plugin_dir: PathBuf,
    /// `PluginInfo.type` it reports (`DRAPlugin`; other values test rejection).
    pub plugin_type: String,
    /// `PluginInfo.supported_versions` it reports; it serves those of `v1.DRAPlugin` and
    /// `v1beta1.DRAPlugin` it lists (`v1` when it lists neither), and of
    /// `v1.DRAResourceHealth` and `v1alpha1.DRAResourceHealth` those it lists and
    /// [`serve_health`](Self::serve_health) allows.
    pub supported_versions: Vec<String>,
    /// CDI kind of its devices, `vendor/class`.
    pub cdi_kind: String,
    /// Pool name of its devices.
    pub pool: String,
    /// The share ids its devices carry (DRAPlugin v1 only: v1beta1 has no field for them).
    pub share_ids: ShareIds,
    /// Serve as one instance of a rolling update, identified by this pod uid (upstream
    /// `kubeletplugin.RollingUpdate(uid)`): sockets `<driver>-<uid>-reg.sock` and
    /// `dra-<uid>.sock`, so two instances of one driver can be registered at once.
    pub rolling_update: Option<String>,
    /// Serve the health services it lists (default true; false lists them without
    /// serving them, so the kubelet's stream gets `UNIMPLEMENTED`).
    pub serve_health: bool,
}

impl SampleDriverConfig {
    /// A driver advertising `v1.DRAPlugin` and `v1beta1.DRAPlugin`.
    pub fn new(
        driver_name: impl Into<String>,
        registry_dir: impl Into<PathBuf>,
        plugin_dir: impl Into<PathBuf>,
    ) -> Self {
        SampleDriverConfig {
            driver_name: driver_name.into(),
            registry_dir: registry_dir.into(),
            plugin_dir: plugin_dir.into(),
            plugin_type: reg::DRA_PLUGIN.into(),
            supported_versions: vec![
                v1::DRA_PLUGIN_SERVICE.into(),
                v1beta1::DRA_PLUGIN_SERVICE.into(),
            ],
            cdi_kind: "corral.example.com/sample".into(),
            pool: "sample-pool".into(),
            share_ids: ShareIds::None,
            rolling_update: None,
            serve_health: true,
        }
    }

    /// The same, also listing (and serving) `service` (e.g.
    /// `corral_proto::dra_health::v1alpha1::DRA_RESOURCE_HEALTH_SERVICE`).
    pub fn with_health(mut self, service: &str) -> Self {
        self.supported_versions.push(service.to_owned());
        self
    }

    /// The registration socket path: `<driver>-reg.sock`, or `<driver>-<pod uid>-reg.sock`
    /// as a rolling-update instance (upstream `draplugin.go`).
    pub fn registration_socket(&self) -> PathBuf {
        let name = match &self.rolling_update {
            None => format!("{}-reg.sock", self.driver_name),
            Some(uid) => format!("{}-{uid}-reg.sock", self.driver_name),
        };
        self.registry_dir.join(name)
    }

    /// The DRAPlugin socket path: `dra.sock`, or `dra-<pod uid>.sock` as a rolling-update
    /// instance.
    pub fn endpoint(&self) -> PathBuf {
        match &self.rolling_update {
            None => self.plugin_dir.join("dra.sock"),
            Some(uid) => self.plugin_dir.join(format!("dra-{uid}.sock")),
        }
    }
}

struct Running {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<Result<(), UdsError>>>,
}

/// A running (or stopped) sample DRA driver.
pub struct SampleDriver {
    config: SampleDriverConfig,
    control: Arc<Control>,
    health: tokio::sync::watch::Sender<Vec<SampleDeviceHealth>>,
    running: Option<Running>,
}

impl std::fmt::Debug for SampleDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SampleDriver")
            .field("config", &self.config)
            .field("running", &self.running.is_some())
            .finish_non_exhaustive()
    }
}

impl SampleDriver {
    /// Bind both sockets and serve. Must be called inside a tokio runtime.
    pub async fn start(config: SampleDriverConfig) -> Result<Self, UdsError> {
        let mut driver = SampleDriver {
            config,
            control: Arc::new(Control::default()),
            health: tokio::sync::watch::channel(Vec::new()).0,
            running: None,
        };
        driver.serve()?;
        Ok(driver)
    }

    fn serve(&mut self) -> Result<(), UdsError> {
        let stop = CancellationToken::new();
        // One v1 implementation; v1beta1 is served through corral-proto's adapter.
        let plugin = |version| service::Plugin {
            control: Arc::clone(&self.control),
            cdi_kind: self.config.cdi_kind.clone(),
            pool: self.config.pool.clone(),
            share_ids: self.config.share_ids.clone(),
            stop: stop.clone(),
            version,
        };
        let lists = |name: &str| self.config.supported_versions.iter().any(|v| v == name);
        let serve_v1beta1 = lists(v1beta1::DRA_PLUGIN_SERVICE);
        let serve_v1 = lists(v1::DRA_PLUGIN_SERVICE) || !serve_v1beta1;
        let v1_server = serve_v1.then(|| v1::dra_plugin_server::DraPluginServer::new(plugin("v1")));
        let v1beta1_server = serve_v1beta1.then(|| {
            v1beta1::dra_plugin_server::DraPluginServer::new(v1beta1::V1ServerWrapper::new(plugin(
                "v1beta1",
            )))
        });
        let serves = |name: &str| self.config.serve_health && lists(name);
        let (health_v1, health_v1alpha1) = health::servers(
            &Arc::new(health::Health {
                reports: self.health.subscribe(),
                pool: self.config.pool.clone(),
                stop: stop.clone(),
            }),
            serves(corral_proto::dra_health::v1::DRA_RESOURCE_HEALTH_SERVICE),
            serves(corral_proto::dra_health::v1alpha1::DRA_RESOURCE_HEALTH_SERVICE),
        );
        let router = Server::builder()
            .add_optional_service(v1_server)
            .add_optional_service(v1beta1_server)
            .add_optional_service(health_v1)
            .add_optional_service(health_v1alpha1);
        let endpoint = UdsListener::bind(self.config.endpoint(), &SocketOptions::default())?;
        let registration = service::Registration {
            info: reg::PluginInfo {
                r#type: self.config.plugin_type.clone(),
                name: self.config.driver_name.clone(),
                endpoint: self.config.endpoint().to_string_lossy().into_owned(),
                supported_versions: self.config.supported_versions.clone(),
            },
            control: Arc::clone(&self.control),
        };
        let reg_router = Server::builder().add_service(
            reg::registration_server::RegistrationServer::new(registration),
        );
        let reg_listener =
            UdsListener::bind(self.config.registration_socket(), &SocketOptions::default())?;
        let tasks = vec![
            tokio::spawn(uds::serve(
                router,
                endpoint,
                stop.clone().cancelled_owned(),
                GRACE,
            )),
            tokio::spawn(uds::serve(
                reg_router,
                reg_listener,
                stop.clone().cancelled_owned(),
                GRACE,
            )),
        ];
        tracing::info!(driver = %self.config.driver_name, socket = %self.config.registration_socket().display(), "sample DRA driver serving");
        self.running = Some(Running { stop, tasks });
        Ok(())
    }

    /// Stop serving and remove both sockets (hanging calls end with `UNAVAILABLE`).
    pub async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop.cancel();
            for task in running.tasks {
                let _ = task.await;
            }
        }
    }

    /// Stop, then serve again on fresh sockets at the same paths: a driver restarting under
    /// the same name. What it prepared and recorded is kept.
    pub async fn restart(&mut self) -> Result<(), UdsError> {
        self.stop().await;
        self.serve()
    }

    /// Whether it is serving.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Its settings.
    pub fn config(&self) -> &SampleDriverConfig {
        &self.config
    }

    /// Report these devices' health from now on: every open health stream gets the list
    /// (a complete report: devices left out time out in the kubelet).
    pub fn set_health(&self, devices: Vec<SampleDeviceHealth>) {
        self.health.send_replace(devices);
    }

    /// Change how it answers.
    pub fn set_behavior(&self, behavior: Behavior) {
        *locked(&self.control.behavior) = behavior;
    }

    /// Serve `claim_uid` with these `(request, device)` pairs instead of one default device.
    pub fn set_allocation(&self, claim_uid: impl Into<String>, allocation: FakeAllocation) {
        locked(&self.control.allocations).insert(claim_uid.into(), allocation);
    }

    /// Every DRAPlugin call received so far.
    pub fn calls(&self) -> Vec<Call> {
        locked(&self.control.calls).clone()
    }

    /// How many calls of `method` named `claim_uid`.
    pub fn call_count(&self, method: &str, claim_uid: &str) -> usize {
        locked(&self.control.calls)
            .iter()
            .filter(|c| c.method == method && c.claim_uids.iter().any(|u| u == claim_uid))
            .count()
    }

    /// What it currently holds prepared, by claim uid.
    pub fn prepared(&self) -> BTreeMap<String, Vec<PreparedDevice>> {
        locked(&self.control.prepared).clone()
    }

    /// Every `NotifyRegistrationStatus` received: (registered, error).
    pub fn registration_statuses(&self) -> Vec<(bool, String)> {
        locked(&self.control.statuses).clone()
    }

    /// Wait at most `timeout` until it has received more than `seen` registration
    /// statuses; returns the newest.
    pub async fn wait_for_status(&self, seen: usize, timeout: Duration) -> Option<(bool, String)> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = locked(&self.control.statuses).get(seen).cloned() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for SampleDriver {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop.cancel();
            for task in running.tasks {
                // Dropping the serving future removes its socket file.
                task.abort();
            }
        }
    }
}

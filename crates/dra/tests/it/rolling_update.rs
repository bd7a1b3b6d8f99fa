//! Rolling driver updates (k8s 1.33+) over real unix sockets: two instances of one driver
//! registered at once (`<driver>-<podUID>-reg.sock`, `dra-<podUID>.sock`), calls going to
//! the newest, either instance going away without a claim being lost, and a second
//! registration of an endpoint refused with upstream's words.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use corral_dra::sample::{SampleDriver, SampleDriverConfig};
use corral_dra::{DraManager, PluginRegistry};
use corral_proto::pluginregistration::v1 as reg;
use corral_proto::tonic::{self, Request, Response, Status};
use corral_proto::uds::{SocketOptions, UdsListener};
use tokio_util::sync::CancellationToken;

const DRIVER: &str = "gpu.example.com";
const PREPARE: &str = "NodePrepareResources";
const UNPREPARE: &str = "NodeUnprepareResources";

/// An instance of `DRIVER` for pod `pod_uid`, as upstream's helper with
/// `RollingUpdate(pod_uid)` serves it.
async fn instance(dirs: &Dirs, pod_uid: &str) -> SampleDriver {
    let mut config = SampleDriverConfig::new(DRIVER, dirs.registry(), dirs.plugins(DRIVER));
    config.rolling_update = Some(pod_uid.into());
    SampleDriver::start(config).await.unwrap()
}

async fn wait_instances(registry: &PluginRegistry, want: &[&SampleDriver]) {
    let want: Vec<_> = want.iter().map(|d| d.config().endpoint()).collect();
    eventually(&format!("instances {want:?}"), || async {
        registry.store().endpoints(DRIVER) == want
    })
    .await;
}

/// Pod `pod` prepares its claim `claim`.
async fn prepare<D: corral_dra::DriverClients>(m: &DraManager<D>, pod_uid: &str, name: &str) {
    m.prepare_resources(&pod(pod_uid, &[name]), &[claim(name, DRIVER, &[pod_uid])])
        .await
        .unwrap();
}

#[tokio::test]
async fn old_instance_goes_away_new_one_unprepares() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut a = instance(&dirs, "pod-a").await;
    assert!(
        a.config()
            .registration_socket()
            .ends_with("gpu.example.com-pod-a-reg.sock")
    );
    assert!(a.config().endpoint().ends_with("dra-pod-a.sock"));
    wait_instances(&registry, &[&a]).await;
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare(&m, "pod-1", "c1").await;
    assert_eq!(a.call_count(PREPARE, "c1-uid"), 1);

    let b = instance(&dirs, "pod-b").await;
    wait_instances(&registry, &[&a, &b]).await;
    prepare(&m, "pod-2", "c2").await;
    assert_eq!(
        b.call_count(PREPARE, "c2-uid"),
        1,
        "the newest instance prepares"
    );
    assert_eq!(a.call_count(PREPARE, "c2-uid"), 0);

    a.stop().await;
    wait_instances(&registry, &[&b]).await;
    // c1 was prepared by A; its claim is keyed by driver name, so B unprepares it.
    assert!(m.claim_info(NAMESPACE, "c1").unwrap().is_prepared());
    m.unprepare_resources("pod-1").await.unwrap();
    assert_eq!(b.call_count(UNPREPARE, "c1-uid"), 1);
    assert!(m.claim_info(NAMESPACE, "c1").is_none());
    assert!(m.claim_info(NAMESPACE, "c2").is_some());
    watcher.stop().await;
}

#[tokio::test]
async fn new_instance_goes_away_old_one_takes_over() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let a = instance(&dirs, "pod-a").await;
    wait_instances(&registry, &[&a]).await;
    let mut b = instance(&dirs, "pod-b").await;
    wait_instances(&registry, &[&a, &b]).await;
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare(&m, "pod-1", "c1").await;
    assert_eq!(b.call_count(PREPARE, "c1-uid"), 1);
    assert_eq!(a.call_count(PREPARE, "c1-uid"), 0);

    b.stop().await;
    wait_instances(&registry, &[&a]).await;
    m.unprepare_resources("pod-1").await.unwrap();
    assert_eq!(a.call_count(UNPREPARE, "c1-uid"), 1);
    assert!(m.claim_infos().is_empty());
    // The driver stays registered throughout: a pod admitted now prepares on A.
    prepare(&m, "pod-2", "c2").await;
    assert_eq!(a.call_count(PREPARE, "c2-uid"), 1);
    watcher.stop().await;
}

/// A registration socket that claims another instance's endpoint.
#[derive(Clone)]
struct Impostor {
    info: reg::PluginInfo,
    statuses: Arc<Mutex<Vec<(bool, String)>>>,
}

#[tonic::async_trait]
impl reg::registration_server::Registration for Impostor {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        self.statuses
            .lock()
            .unwrap()
            .push((status.plugin_registered, status.error));
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

#[tokio::test]
async fn an_endpoint_registered_twice_is_refused_with_upstreams_words() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let a = instance(&dirs, "pod-a").await;
    wait_instances(&registry, &[&a]).await;

    let impostor = Impostor {
        info: reg::PluginInfo {
            r#type: reg::DRA_PLUGIN.into(),
            name: DRIVER.into(),
            endpoint: a.config().endpoint().to_string_lossy().into_owned(),
            supported_versions: vec!["v1.DRAPlugin".into()],
        },
        statuses: Arc::default(),
    };
    let socket = dirs.registry().join(format!("{DRIVER}-impostor-reg.sock"));
    let listener = UdsListener::bind(&socket, &SocketOptions::default()).unwrap();
    let stop = CancellationToken::new();
    let serving = tokio::spawn(corral_proto::uds::serve(
        tonic::transport::Server::builder().add_service(
            reg::registration_server::RegistrationServer::new(impostor.clone()),
        ),
        listener,
        stop.clone().cancelled_owned(),
        Duration::from_millis(100),
    ));
    eventually("the impostor is told", || async {
        !impostor.statuses.lock().unwrap().is_empty()
    })
    .await;
    let (registered, reason) = impostor.statuses.lock().unwrap()[0].clone();
    assert!(!registered);
    let upstream = format!(
        "endpoint {} already registered for DRA driver plugin {DRIVER}",
        a.config().endpoint().display()
    );
    assert!(reason.contains(&upstream), "{reason}");
    assert_eq!(registry.store().endpoints(DRIVER), [a.config().endpoint()]);
    stop.cancel();
    let _ = serving.await;
    watcher.stop().await;
}

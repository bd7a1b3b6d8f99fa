//! A sample DRA driver: registers through a plugin registration directory and prepares
//! fake devices into CDI ids until interrupted.
//!
//! ```text
//! cargo run -p corral-dra --example sample_dra_driver -- \
//!     --driver gpu.example.com --registry-dir /var/lib/kubelet/plugins_registry \
//!     --plugin-dir /var/lib/kubelet/plugins/gpu.example.com [--fail MESSAGE | --hang] \
//!     [--share-id ID | --share-ids-per-device] [--pod-uid UID]
//! ```
//!
//! `--pod-uid` serves as one instance of a rolling update (`<driver>-<UID>-reg.sock`,
//! `dra-<UID>.sock`): start a second one with another uid, then stop the first.

use std::path::PathBuf;

use corral_dra::sample::{Behavior, SampleDriver, SampleDriverConfig, ShareIds};
use corral_proto::pluginregistration::v1::PLUGINS_REGISTRY_PATH;

fn usage() -> ! {
    eprintln!(
        "usage: sample_dra_driver --driver NAME [--registry-dir DIR] [--plugin-dir DIR] [--fail MESSAGE | --hang] [--share-id ID | --share-ids-per-device] [--pod-uid UID]"
    );
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut driver = None;
    let mut registry_dir = PathBuf::from(PLUGINS_REGISTRY_PATH);
    let mut plugin_dir = None;
    let mut behavior = Behavior::Normal;
    let mut share_ids = ShareIds::None;
    let mut pod_uid = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--driver" => driver = Some(value()),
            "--registry-dir" => registry_dir = PathBuf::from(value()),
            "--plugin-dir" => plugin_dir = Some(PathBuf::from(value())),
            "--fail" => behavior = Behavior::FailClaims(value()),
            "--hang" => behavior = Behavior::Hang,
            "--share-id" => share_ids = ShareIds::Fixed(value()),
            "--share-ids-per-device" => share_ids = ShareIds::PerDevice,
            "--pod-uid" => pod_uid = Some(value()),
            _ => usage(),
        }
    }
    let Some(driver) = driver else { usage() };
    let plugin_dir =
        plugin_dir.unwrap_or_else(|| PathBuf::from("/var/lib/kubelet/plugins").join(&driver));
    let mut config = SampleDriverConfig::new(&driver, registry_dir, plugin_dir);
    config.share_ids = share_ids;
    config.rolling_update = pod_uid;
    let mut sample = match SampleDriver::start(config).await {
        Ok(sample) => sample,
        Err(err) => {
            eprintln!("sample_dra_driver: {err}");
            std::process::exit(1);
        }
    };
    sample.set_behavior(behavior);
    println!(
        "sample DRA driver {driver} registered at {}; Ctrl-C to stop",
        sample.config().registration_socket().display()
    );
    let _ = tokio::signal::ctrl_c().await;
    sample.stop().await;
}

//! A sample device plugin: serves N fake devices and registers with a device manager.
//!
//! ```text
//! cargo run -p corral-devicemgr --example sample_device_plugin -- \
//!     <plugin dir> [resource] [devices] [numa nodes, comma-separated]
//! ```
//!
//! It serves `<plugin dir>/sample-<pid>.sock`, registers on `<plugin dir>/kubelet.sock`,
//! and runs until Ctrl-C.

use std::path::PathBuf;

use corral_devicemgr::sample::{SampleConfig, SamplePlugin};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: sample_device_plugin <plugin dir> [resource] [devices] [numa nodes]")?,
    );
    let resource = args
        .next()
        .unwrap_or_else(|| "corral.dev/sample".to_owned());
    let count: usize = args.next().map_or(Ok(4), |n| n.parse())?;
    let numa: Vec<i64> = match args.next() {
        Some(list) => list.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => vec![0],
    };
    let socket = dir.join(format!("sample-{}.sock", std::process::id()));
    let config = SampleConfig::new(&resource, &socket, count, &numa);
    let plugin = SamplePlugin::start(config).await?;
    plugin.register(&dir.join("kubelet.sock")).await?;
    println!(
        "serving {count} devices of {resource} on {}",
        socket.display()
    );
    tokio::signal::ctrl_c().await?;
    plugin.stop().await;
    Ok(())
}

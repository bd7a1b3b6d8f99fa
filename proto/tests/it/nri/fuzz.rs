//! Arbitrary bytes on a plugin's trunk, as a broken or hostile runtime could send them: the
//! plugin never panics and never hangs — it answers what parses and ends with the trunk,
//! cleanly or with a typed error, within its bounds.

use std::time::Duration;

use corral_proto::nri::NriStatus;
use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::plugin::{NriPlugin, PluginConfig, PluginStub};
use proptest::prelude::*;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

struct Plugin;

#[tonic::async_trait]
impl NriPlugin for Plugin {
    async fn configure(&self, _: api::ConfigureRequest) -> Result<EventMask, NriStatus> {
        Ok(EventMask::of(&[Event::CreateContainer]))
    }
}

/// A frame header for one of the two connections (or another id), with a length that may
/// or may not match what follows.
fn frame_header() -> impl Strategy<Value = Vec<u8>> {
    (0u32..4, 0u32..64).prop_map(|(conn, len)| {
        let mut bytes = conn.to_be_bytes().to_vec();
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes
    })
}

/// Raw bytes, and frames with arbitrary payloads (so the ttrpc layer sees garbage too).
fn trunk_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        proptest::collection::vec(
            (
                frame_header(),
                proptest::collection::vec(any::<u8>(), 0..64)
            ),
            0..8
        )
        .prop_map(|frames| {
            frames
                .into_iter()
                .flat_map(|(header, payload)| header.into_iter().chain(payload))
                .collect()
        }),
    ]
}

corral_testkit::fuzz! {
    fn fuzz_nri_trunk(bytes in trunk_bytes()) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (plugin_end, mut peer) = UnixStream::pair().unwrap();
            let mut config = PluginConfig::new("fuzz", "01").unwrap();
            config.registration_timeout = Duration::from_millis(200);
            let stub = PluginStub::over(plugin_end, config).unwrap();
            let plugin = tokio::spawn(stub.run(Plugin));
            let _ = peer.write_all(&bytes).await;
            let _ = peer.shutdown().await;
            drop(peer);
            // Ends (Ok, a timeout, a protocol error, a closed trunk), never hangs or panics.
            // The trunk is closed and the registration timeout short: it ends at once, and
            // the generous bound only tells a hang from a busy machine's slowness.
            let ended = tokio::time::timeout(Duration::from_secs(60), plugin).await;
            let joined = ended.expect("the plugin ends with its trunk");
            joined.expect("the plugin does not panic").ok();
        });
    }
}

/// What `bytes` decode to as a `SynchronizeRequest`, at least: its pods' and containers'
/// structs (their strings and nested parts come on top).
fn decoded_at_least(sync: &api::SynchronizeRequest) -> u64 {
    (sync.pods.len() * std::mem::size_of::<api::PodSandbox>()
        + sync.containers.len() * std::mem::size_of::<api::Container>()) as u64
}

/// Mostly empty or tiny pods and containers, then arbitrary bytes: the most decoded memory
/// per byte on the wire.
fn sync_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec((prop_oneof![Just(0x0au8), Just(0x12)], 0u8..4), 0..400),
        proptest::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(|(parts, tail)| {
            let mut bytes = Vec::new();
            for (field, len) in parts {
                bytes.push(field);
                bytes.push(len);
                bytes.extend(std::iter::repeat_n(0x08, usize::from(len)));
            }
            bytes.extend(tail);
            bytes
        })
}

corral_testkit::fuzz! {
    /// `decode_cost` never panics, and bounds what prost decodes: for bytes that decode as
    /// a `SynchronizeRequest`, the estimate covers at least its pods' and containers'
    /// structs.
    fn fuzz_decode_cost(bytes in prop_oneof![sync_bytes(), proptest::collection::vec(any::<u8>(), 0..512)]) {
        use corral_proto::nri::decode_cost::{TOP_LEVEL, decode_cost};
        use prost::Message;
        let cost = decode_cost(&bytes, TOP_LEVEL);
        if let Ok(sync) = api::SynchronizeRequest::decode(bytes.as_slice()) {
            prop_assert!(cost >= decoded_at_least(&sync), "{cost} for {} pods, {} containers", sync.pods.len(), sync.containers.len());
        }
    }
}

//! `corral run --nri`: the agent as an NRI plugin of the container runtime. It dials the
//! runtime's NRI socket, registers, and serves the runtime's events through
//! [`plugin::NodePlugin`]; a lost connection is redialed with backoff (1 s doubling to
//! 30 s), the node's state kept, and the runtime's Synchronize on reconnect reconciles it.
//! Launched by the runtime itself (`NRI_PLUGIN_SOCKET` set), corral serves the inherited
//! connection once, with the name and index the runtime gave, and stops with it. The
//! [`NriLink`] tells the probes whether corral is synchronized with the runtime.

mod link;
mod plugin;
mod pod;
mod pod_resources;
mod runtime;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_restart;
#[cfg(test)]
mod tests_sync_cost;
#[cfg(test)]
mod tests_v0_10;
mod updates;
mod validate;

use std::sync::Arc;
use std::time::Duration;

use corral_proto::nri::plugin::PluginStub;

pub(crate) use link::{LinkStatus, NriLink};
pub(crate) use runtime::{NriRuntime, RuntimeSlot};

use crate::config::NriSettings;
use crate::node::Node;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How serving NRI ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NriEnd {
    /// Asked to stop.
    Stopped,
    /// The runtime that launched corral closed its connection: the agent should exit (the
    /// runtime launches a new one).
    RuntimeLeft,
}

/// Connects, registers and serves until `stop`; reconnects whenever the runtime goes away
/// (unless the runtime launched corral: then it ends with the connection).
pub(crate) async fn serve(
    node: Arc<Node>,
    settings: NriSettings,
    slot: RuntimeSlot,
    link: NriLink,
    stop: impl std::future::Future<Output = ()>,
) -> NriEnd {
    tokio::pin!(stop);
    let config = &settings.plugin;
    let plugin = || plugin::NodePlugin::new(Arc::clone(&node), &settings).with_link(link.clone());
    match PluginStub::from_runtime_env() {
        Ok(Some(stub)) => {
            slot.set(Some(stub.runtime()));
            tracing::info!("NRI: launched by the runtime, serving the inherited connection");
            let ended = tokio::select! {
                () = &mut stop => return NriEnd::Stopped,
                ended = stub.run(plugin()) => ended,
            };
            slot.set(None);
            link.lost();
            match ended {
                Ok(()) => tracing::info!("NRI: the runtime closed its connection; exiting"),
                Err(err) => {
                    let err = crate::error_text::error_chain(&err);
                    tracing::error!(err = %err, "NRI: the runtime's connection failed; exiting");
                }
            }
            return NriEnd::RuntimeLeft;
        }
        Ok(None) => {}
        Err(err) => {
            let err = crate::error_text::error_chain(&err);
            tracing::error!(err = %err, "NRI: NRI_PLUGIN_SOCKET is set but unusable; dialing the socket instead");
        }
    }
    let mut backoff = FIRST_BACKOFF;
    loop {
        let session = async {
            let stub = PluginStub::connect(config.clone()).await?;
            slot.set(Some(stub.runtime()));
            tracing::info!(socket = %config.socket.display(), index = %config.index, "NRI: connected, registering");
            stub.run(plugin()).await
        };
        let ended = tokio::select! {
            () = &mut stop => {
                slot.set(None);
                return NriEnd::Stopped;
            }
            ended = session => ended,
        };
        slot.set(None);
        link.lost();
        give_back_memory();
        match ended {
            Ok(()) => {
                tracing::warn!("NRI: the runtime closed the connection; reconnecting");
                backoff = FIRST_BACKOFF;
            }
            Err(err) => {
                let err = crate::error_text::error_chain(&err);
                tracing::warn!(err = %err, retry_in = ?backoff, "NRI: connection failed");
            }
        }
        tokio::select! {
            () = &mut stop => return NriEnd::Stopped,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Return the memory a connection's buffers and requests used to the system once the
/// connection ended: glibc keeps freed small allocations in its free lists otherwise, and a
/// runtime that sent much would leave the agent's resident size high for good.
#[allow(unsafe_code)]
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only releases free heap memory; it takes no pointer and is
        // safe to call at any time from any thread.
        unsafe {
            malloc_trim(0);
        }
    }
}

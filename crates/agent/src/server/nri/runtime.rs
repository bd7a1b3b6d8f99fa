//! The CPU manager's [`ContainerRuntime`] in NRI mode: a cpuset push (the reconcile loop's)
//! is an NRI `UpdateContainers` call on the current connection to the runtime.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use corral_cpumgr::{CfsQuota, ContainerRuntime, RuntimeError};
use corral_proto::nri::api;
use corral_proto::nri::plugin::RuntimeClient;
use corral_topology::CpuSet;

use super::updates::{Cpuset, OnFailure, cpuset_update};

/// How long one `UpdateContainers` may take.
const UPDATE_DEADLINE: Duration = Duration::from_secs(2);

/// The runtime's `Runtime` service while corral is connected.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuntimeSlot(Arc<Mutex<Option<RuntimeClient>>>);

impl RuntimeSlot {
    /// The connection to use from now on (`None`: disconnected).
    pub(crate) fn set(&self, client: Option<RuntimeClient>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = client;
    }

    fn get(&self) -> Option<RuntimeClient> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Pushes cpusets through NRI, on the connection in `slot`.
#[derive(Debug)]
pub(crate) struct NriRuntime {
    slot: RuntimeSlot,
}

impl NriRuntime {
    pub(crate) fn new(slot: RuntimeSlot) -> Self {
        NriRuntime { slot }
    }
}

#[corral_cpumgr::async_trait]
impl ContainerRuntime for NriRuntime {
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpus: &CpuSet,
        quota: CfsQuota,
    ) -> Result<(), RuntimeError> {
        let Some(client) = self.slot.get() else {
            let why =
                format!("not connected to the NRI runtime: cannot update container {container_id}");
            return Err(RuntimeError::new(why));
        };
        let request = api::UpdateContainersRequest {
            update: vec![cpuset_update(
                container_id,
                Cpuset {
                    cpus: cpus.to_string(),
                    mems: String::new(),
                    quota,
                },
                OnFailure::Report,
            )],
            evict: Vec::new(),
        };
        let answer = tokio::time::timeout(UPDATE_DEADLINE, client.update_containers(&request));
        match answer.await {
            Err(_) => Err(RuntimeError::new(format!(
                "UpdateContainers for {container_id} did not answer within {UPDATE_DEADLINE:?}"
            ))),
            Ok(Err(err)) => Err(RuntimeError::new(err)),
            Ok(Ok(response)) if !response.failed.is_empty() => Err(RuntimeError::new(format!(
                "the runtime could not update container {container_id}"
            ))),
            Ok(Ok(_)) => Ok(()),
        }
    }
}

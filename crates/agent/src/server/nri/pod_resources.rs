//! The devices the kubelet gave a container, read from its podresources API (v1 `Get`,
//! falling back to `List` on a kubelet without `Get`), with the NUMA nodes the kubelet
//! reports for each device.

use std::path::Path;
use std::time::Duration;

use corral_proto::podresources::v1 as pr;
use corral_proto::podresources::v1::pod_resources_lister_client::PodResourcesListerClient;
use corral_proto::tonic;

use crate::node::DeviceNumaNodes;

/// How long one podresources call may take (dial included).
const DEADLINE: Duration = Duration::from_secs(2);

/// Why the kubelet's podresources API could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PodResourcesError {
    /// The socket could not be dialed.
    #[error("cannot dial the kubelet's podresources socket {socket}")]
    Connect {
        /// The socket.
        socket: String,
        /// The cause.
        source: corral_proto::uds::UdsError,
    },
    /// The kubelet answered with an error.
    #[error("the kubelet's podresources {call} failed")]
    Call {
        /// `Get` or `List`.
        call: &'static str,
        /// The kubelet's status.
        source: tonic::Status,
    },
    /// No answer in time.
    #[error("the kubelet's podresources API did not answer within {0:?}")]
    Timeout(Duration),
}

/// The devices of `container` in pod `namespace/name`, by resource; empty when the kubelet
/// does not know the pod or gave it none.
pub(crate) async fn container_devices(
    socket: &Path,
    namespace: &str,
    name: &str,
    container: &str,
) -> Result<DeviceNumaNodes, PodResourcesError> {
    let call = async {
        let channel = corral_proto::uds::connect(socket, DEADLINE)
            .await
            .map_err(|source| PodResourcesError::Connect {
                socket: socket.display().to_string(),
                source,
            })?;
        let mut client = PodResourcesListerClient::new(channel);
        let request = pr::GetPodResourcesRequest {
            pod_name: name.to_owned(),
            pod_namespace: namespace.to_owned(),
        };
        let pod = match client.get(request).await {
            Ok(answer) => answer.into_inner().pod_resources,
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                let list = client
                    .list(pr::ListPodResourcesRequest {})
                    .await
                    .map_err(|source| PodResourcesError::Call {
                        call: "List",
                        source,
                    })?;
                let pods = list.into_inner().pod_resources;
                pods.into_iter()
                    .find(|p| p.name == name && p.namespace == namespace)
            }
            Err(source) => {
                return Err(PodResourcesError::Call {
                    call: "Get",
                    source,
                });
            }
        };
        Ok(pod
            .map(|pod| devices_of(&pod, container))
            .unwrap_or_default())
    };
    tokio::time::timeout(DEADLINE, call)
        .await
        .unwrap_or(Err(PodResourcesError::Timeout(DEADLINE)))
}

fn devices_of(pod: &pr::PodResources, container: &str) -> DeviceNumaNodes {
    let mut devices = DeviceNumaNodes::new();
    for c in pod.containers.iter().filter(|c| c.name == container) {
        for d in &c.devices {
            let nodes = devices.entry(d.resource_name.clone()).or_default();
            for node in d.topology.iter().flat_map(|t| &t.nodes) {
                if let Ok(id) = usize::try_from(node.id)
                    && !nodes.contains(&id)
                {
                    nodes.push(id);
                }
            }
        }
    }
    devices
}

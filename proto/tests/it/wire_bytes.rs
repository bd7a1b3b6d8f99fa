//! Wire check: prost's encoding of each API's messages equals an encoding written out by hand
//! from upstream's field numbers and wire types. A renumbered field, a changed type or a
//! renamed package (for service paths) fails here.
//!
//! The expected bytes are built with the tiny protobuf writer below, one call per field, with
//! upstream's field number written as a literal next to it.

use std::collections::HashMap;

use prost::Message;

/// A hand-rolled protobuf writer: just enough to spell out expected bytes.
#[derive(Default)]
struct Wire(Vec<u8>);

impl Wire {
    fn varint(buf: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        buf.push(value as u8);
    }
    /// A varint field (wire type 0): int32/int64/uint64/bool/enum.
    fn int(mut self, field: u32, value: u64) -> Self {
        Self::varint(&mut self.0, u64::from(field) << 3);
        Self::varint(&mut self.0, value);
        self
    }
    /// A length-delimited field (wire type 2): string, bytes, message, packed repeated.
    fn bytes(mut self, field: u32, payload: &[u8]) -> Self {
        Self::varint(&mut self.0, (u64::from(field) << 3) | 2);
        Self::varint(&mut self.0, payload.len() as u64);
        self.0.extend_from_slice(payload);
        self
    }
    fn str(self, field: u32, value: &str) -> Self {
        self.bytes(field, value.as_bytes())
    }
    fn msg(self, field: u32, inner: Wire) -> Self {
        self.bytes(field, &inner.0)
    }
    /// A packed repeated varint field (proto3 default for repeated scalars).
    fn packed(self, field: u32, values: &[u64]) -> Self {
        let mut payload = Vec::new();
        for &v in values {
            Self::varint(&mut payload, v);
        }
        self.bytes(field, &payload)
    }
    /// One map entry: key is field 1, value field 2 of the entry message.
    fn map_entry(self, field: u32, key: &str, value: Wire) -> Self {
        self.msg(field, Wire::default().str(1, key).msg(2, value))
    }
    fn map_str(self, field: u32, key: &str, value: &str) -> Self {
        self.msg(field, Wire::default().str(1, key).str(2, value))
    }
}

#[test]
fn deviceplugin_v1beta1_register_request() {
    use corral_proto::deviceplugin::v1beta1::*;
    let message = RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "gpu.sock".into(),
        resource_name: "vendor.com/gpu".into(),
        options: Some(DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: true,
        }),
    };
    let expected = Wire::default()
        .str(1, "v1beta1") // version
        .str(2, "gpu.sock") // endpoint
        .str(3, "vendor.com/gpu") // resource_name
        .msg(4, Wire::default().int(1, 1).int(2, 1)); // options{pre_start_required, get_preferred_allocation_available}
    assert_eq!(message.encode_to_vec(), expected.0);
}

#[test]
fn deviceplugin_v1beta1_devices_and_preferred_allocation() {
    use corral_proto::deviceplugin::v1beta1::*;
    let list = ListAndWatchResponse {
        devices: vec![Device {
            id: "dev-0".into(),
            health: "Healthy".into(),
            topology: Some(TopologyInfo {
                nodes: vec![NumaNode { id: 1 }, NumaNode { id: 3 }],
            }),
        }],
    };
    let topology = Wire::default()
        .msg(1, Wire::default().int(1, 1)) // nodes[0].ID
        .msg(1, Wire::default().int(1, 3)); // nodes[1].ID
    let expected = Wire::default().msg(
        1, // devices
        Wire::default()
            .str(1, "dev-0") // ID
            .str(2, "Healthy") // health
            .msg(3, topology), // topology
    );
    assert_eq!(list.encode_to_vec(), expected.0);

    let request = PreferredAllocationRequest {
        container_requests: vec![ContainerPreferredAllocationRequest {
            available_device_i_ds: vec!["a".into(), "b".into()],
            must_include_device_i_ds: vec!["a".into()],
            allocation_size: 2,
        }],
    };
    let expected = Wire::default().msg(
        1, // container_requests
        Wire::default()
            .str(1, "a") // available_deviceIDs
            .str(1, "b")
            .str(2, "a") // must_include_deviceIDs
            .int(3, 2), // allocation_size
    );
    assert_eq!(request.encode_to_vec(), expected.0);
    let response = PreStartContainerRequest {
        devices_ids: vec!["x".into()],
    };
    assert_eq!(response.encode_to_vec(), Wire::default().str(1, "x").0);
}

#[test]
fn deviceplugin_v1beta1_allocate_response_with_maps() {
    use corral_proto::deviceplugin::v1beta1::*;
    let message = AllocateResponse {
        container_responses: vec![ContainerAllocateResponse {
            envs: HashMap::from([("GPU".to_string(), "0".to_string())]),
            mounts: vec![Mount {
                container_path: "/c".into(),
                host_path: "/h".into(),
                read_only: true,
            }],
            devices: vec![DeviceSpec {
                container_path: "/dev/x".into(),
                host_path: "/dev/y".into(),
                permissions: "rw".into(),
            }],
            annotations: HashMap::from([("k".to_string(), "v".to_string())]),
            cdi_devices: vec![CdiDevice {
                name: "vendor.com/gpu=0".into(),
            }],
        }],
    };
    let container = Wire::default()
        .map_str(1, "GPU", "0") // envs
        .msg(2, Wire::default().str(1, "/c").str(2, "/h").int(3, 1)) // mounts
        .msg(
            3,
            Wire::default()
                .str(1, "/dev/x")
                .str(2, "/dev/y")
                .str(3, "rw"),
        ) // devices
        .map_str(4, "k", "v") // annotations
        .msg(5, Wire::default().str(1, "vendor.com/gpu=0")); // cdi_devices
    let expected = Wire::default().msg(1, container); // container_responses
    assert_eq!(message.encode_to_vec(), expected.0);
    let request = AllocateRequest {
        container_requests: vec![ContainerAllocateRequest {
            devices_ids: vec!["d".into()],
        }],
    };
    assert_eq!(
        request.encode_to_vec(),
        Wire::default().msg(1, Wire::default().str(1, "d")).0
    );
}

#[test]
fn podresources_v1_pod_resources() {
    use corral_proto::podresources::v1::*;
    let topology = TopologyInfo {
        nodes: vec![NumaNode { id: 1 }],
    };
    let message = ListPodResourcesResponse {
        pod_resources: vec![PodResources {
            name: "pod".into(),
            namespace: "ns".into(),
            containers: vec![ContainerResources {
                name: "c".into(),
                devices: vec![ContainerDevices {
                    resource_name: "vendor.com/gpu".into(),
                    device_ids: vec!["g0".into()],
                    topology: Some(topology.clone()),
                }],
                cpu_ids: vec![2, 3],
                memory: vec![ContainerMemory {
                    memory_type: "memory".into(),
                    size: 1024,
                    topology: Some(topology),
                }],
                dynamic_resources: vec![DynamicResource {
                    claim_name: "claim".into(),
                    claim_namespace: "ns".into(),
                    claim_resources: vec![ClaimResource {
                        cdi_devices: vec![CdiDevice { name: "x=y".into() }],
                        driver_name: "drv".into(),
                        pool_name: "pool".into(),
                        device_name: "dev".into(),
                        share_id: Some("s".into()),
                    }],
                }],
            }],
            cpu_ids: vec![7],
            memory: vec![],
        }],
    };
    let numa1 = || Wire::default().msg(1, Wire::default().int(1, 1)); // nodes[0].ID
    let claim_resource = Wire::default()
        .msg(1, Wire::default().str(1, "x=y")) // cdi_devices
        .str(2, "drv") // driver_name
        .str(3, "pool") // pool_name
        .str(4, "dev") // device_name
        .str(5, "s"); // share_id (proto3 optional: present even if empty)
    let container = Wire::default()
        .str(1, "c") // name
        .msg(
            2,
            Wire::default()
                .str(1, "vendor.com/gpu")
                .str(2, "g0")
                .msg(3, numa1()),
        ) // devices
        .packed(3, &[2, 3]) // cpu_ids
        .msg(
            4,
            Wire::default()
                .str(1, "memory")
                .int(2, 1024)
                .msg(3, numa1()),
        ) // memory
        .msg(
            5, // dynamic_resources
            Wire::default()
                .str(2, "claim") // claim_name
                .str(3, "ns") // claim_namespace
                .msg(4, claim_resource), // claim_resources
        );
    let pod = Wire::default()
        .str(1, "pod")
        .str(2, "ns")
        .msg(3, container)
        .packed(4, &[7]); // pod-level cpu_ids
    let expected = Wire::default().msg(1, pod); // pod_resources
    assert_eq!(message.encode_to_vec(), expected.0);

    let get = GetPodResourcesRequest {
        pod_name: "p".into(),
        pod_namespace: "n".into(),
    };
    assert_eq!(
        get.encode_to_vec(),
        Wire::default().str(1, "p").str(2, "n").0
    );
}

#[test]
fn dra_v1_and_v1beta1_prepare() {
    use corral_proto::dra::{v1, v1beta1};
    let request = v1::NodePrepareResourcesRequest {
        claims: vec![v1::Claim {
            namespace: "ns".into(),
            uid: "uid-1".into(),
            name: "claim".into(),
        }],
    };
    let expected = Wire::default().msg(
        1,                                                            // claims
        Wire::default().str(1, "ns").str(2, "uid-1").str(3, "claim"), // namespace, uid, name
    );
    assert_eq!(request.encode_to_vec(), expected.0);

    let response = v1::NodePrepareResourcesResponse {
        claims: HashMap::from([(
            "uid-1".to_string(),
            v1::NodePrepareResourceResponse {
                devices: vec![v1::Device {
                    request_names: vec!["req".into()],
                    pool_name: "pool".into(),
                    device_name: "dev".into(),
                    cdi_device_ids: vec!["vendor.com/x=dev".into()],
                    share_id: Some("share".into()),
                }],
                error: "boom".into(),
            },
        )]),
    };
    let device = Wire::default()
        .str(1, "req") // request_names
        .str(2, "pool") // pool_name
        .str(3, "dev") // device_name
        .str(4, "vendor.com/x=dev") // cdi_device_ids
        .str(5, "share"); // share_id
    let value = Wire::default().msg(1, device).str(2, "boom"); // devices, error
    let expected = Wire::default().map_entry(1, "uid-1", value); // claims
    assert_eq!(response.encode_to_vec(), expected.0);

    let beta = v1beta1::NodeUnprepareResourcesResponse {
        claims: HashMap::from([(
            "u".to_string(),
            v1beta1::NodeUnprepareResourceResponse { error: "e".into() },
        )]),
    };
    let expected = Wire::default().map_entry(1, "u", Wire::default().str(1, "e"));
    assert_eq!(beta.encode_to_vec(), expected.0);
    let beta_device = v1beta1::Device {
        request_names: vec![],
        pool_name: "p".into(),
        device_name: "d".into(),
        cdi_device_ids: vec![],
    };
    assert_eq!(
        beta_device.encode_to_vec(),
        Wire::default().str(2, "p").str(3, "d").0
    );
}

#[test]
fn dra_health_v1_enum_and_nested() {
    use corral_proto::dra_health::v1::*;
    let message = NodeWatchResourcesResponse {
        devices: vec![DeviceHealth {
            device: Some(DeviceIdentifier {
                pool_name: "pool".into(),
                device_name: "dev".into(),
            }),
            health: HealthStatus::Unhealthy as i32,
            last_updated_time: 1_700_000_000,
            health_check_timeout_seconds: 30,
            message: "hot".into(),
        }],
    };
    let expected = Wire::default().msg(
        1, // devices
        Wire::default()
            .msg(1, Wire::default().str(1, "pool").str(2, "dev")) // device
            .int(2, 2) // health = UNHEALTHY (2)
            .int(3, 1_700_000_000) // last_updated_time
            .int(4, 30) // health_check_timeout_seconds
            .str(5, "hot"), // message
    );
    assert_eq!(message.encode_to_vec(), expected.0);
    assert_eq!(HealthStatus::Unknown as i32, 0);
    assert_eq!(HealthStatus::Healthy as i32, 1);
}

#[test]
fn dra_health_v1alpha1_is_v1_on_the_wire() {
    // v1.36 speaks v1alpha1; 1.37's v1 is the same messages and numbers.
    use corral_proto::dra_health::{v1, v1alpha1};
    let alpha = v1alpha1::NodeWatchResourcesResponse {
        devices: vec![v1alpha1::DeviceHealth {
            device: Some(v1alpha1::DeviceIdentifier {
                pool_name: "pool".into(),
                device_name: "dev".into(),
            }),
            health: v1alpha1::HealthStatus::Healthy as i32,
            last_updated_time: 1_700_000_000,
            health_check_timeout_seconds: 30,
            message: "ok".into(),
        }],
    };
    let bytes = alpha.encode_to_vec();
    let v1 = v1::NodeWatchResourcesResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(v1.encode_to_vec(), bytes);
    assert_eq!(v1.devices[0].health, v1::HealthStatus::Healthy as i32);
    assert_eq!(
        v1alpha1::DRA_RESOURCE_HEALTH_SERVICE,
        "v1alpha1.DRAResourceHealth"
    );
}

#[test]
fn pluginregistration_v1_info_and_status() {
    use corral_proto::pluginregistration::v1::*;
    let info = PluginInfo {
        r#type: "DRAPlugin".into(),
        name: "drv.example.com".into(),
        endpoint: "/plugins/drv/dra.sock".into(),
        supported_versions: vec!["v1.DRAPlugin".into(), "v1beta1.DRAPlugin".into()],
    };
    let expected = Wire::default()
        .str(1, "DRAPlugin") // type
        .str(2, "drv.example.com") // name
        .str(3, "/plugins/drv/dra.sock") // endpoint
        .str(4, "v1.DRAPlugin") // supported_versions
        .str(4, "v1beta1.DRAPlugin");
    assert_eq!(info.encode_to_vec(), expected.0);
    let status = RegistrationStatus {
        plugin_registered: true,
        error: "no".into(),
    };
    assert_eq!(
        status.encode_to_vec(),
        Wire::default().int(1, 1).str(2, "no").0
    );
}

#[test]
fn cri_v1_update_container_resources() {
    use corral_proto::cri::v1::*;
    let request = UpdateContainerResourcesRequest {
        container_id: "abc".into(),
        linux: Some(LinuxContainerResources {
            cpuset_cpus: "2-3".into(),
            cpuset_mems: "0".into(),
            cpu_shares: 2048,
            ..Default::default()
        }),
        windows: None,
        annotations: HashMap::from([("a".to_string(), "b".to_string())]),
    };
    let linux = Wire::default()
        .int(3, 2048) // cpu_shares
        .str(6, "2-3") // cpuset_cpus
        .str(7, "0"); // cpuset_mems
    let expected = Wire::default()
        .str(1, "abc") // container_id
        .msg(2, linux) // linux
        .map_str(4, "a", "b"); // annotations
    assert_eq!(request.encode_to_vec(), expected.0);

    let status = ContainerStatusResponse {
        status: Some(ContainerStatus {
            id: "abc".into(),
            metadata: Some(ContainerMetadata {
                name: "c".into(),
                attempt: 2,
            }),
            state: ContainerState::ContainerExited as i32,
            exit_code: 1,
            ..Default::default()
        }),
        info: HashMap::new(),
    };
    let expected = Wire::default().msg(
        1, // status
        Wire::default()
            .str(1, "abc") // id
            .msg(2, Wire::default().str(1, "c").int(2, 2)) // metadata
            .int(3, 2) // state = CONTAINER_EXITED
            .int(7, 1), // exit_code
    );
    assert_eq!(status.encode_to_vec(), expected.0);
}

/// The gRPC method paths carry the proto package and service names: they must be upstream's.
#[test]
fn service_paths_match_upstream() {
    let sources = [
        (
            include_str!("../../src/gen/deviceplugin_v1beta1.rs"),
            "/v1beta1.Registration/Register",
        ),
        (
            include_str!("../../src/gen/deviceplugin_v1beta1.rs"),
            "/v1beta1.DevicePlugin/ListAndWatch",
        ),
        (
            include_str!("../../src/gen/deviceplugin_v1beta1.rs"),
            "/v1beta1.DevicePlugin/GetPreferredAllocation",
        ),
        (
            include_str!("../../src/gen/deviceplugin_v1beta1.rs"),
            "/v1beta1.DevicePlugin/PreStartContainer",
        ),
        (
            include_str!("../../src/gen/podresources_v1.rs"),
            "/v1.PodResourcesLister/GetAllocatableResources",
        ),
        (
            include_str!("../../src/gen/podresources_v1.rs"),
            "/v1.PodResourcesLister/Get",
        ),
        (
            include_str!("../../src/gen/dra_v1.rs"),
            "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        ),
        (
            include_str!("../../src/gen/dra_v1beta1.rs"),
            "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
        ),
        (
            include_str!("../../src/gen/dra_health_v1.rs"),
            "/v1.DRAResourceHealth/NodeWatchResources",
        ),
        (
            include_str!("../../src/gen/dra_health_v1alpha1.rs"),
            "/v1alpha1.DRAResourceHealth/NodeWatchResources",
        ),
        (
            include_str!("../../src/gen/pluginregistration_v1.rs"),
            "/pluginregistration.Registration/GetInfo",
        ),
        (
            include_str!("../../src/gen/pluginregistration_v1.rs"),
            "/pluginregistration.Registration/NotifyRegistrationStatus",
        ),
        (
            include_str!("../../src/gen/cri_v1.rs"),
            "/runtime.v1.RuntimeService/UpdateContainerResources",
        ),
        (
            include_str!("../../src/gen/cri_v1.rs"),
            "/runtime.v1.RuntimeService/ContainerStatus",
        ),
    ];
    for (source, path) in sources {
        assert!(
            source.contains(&format!("\"{path}\"")),
            "missing method path {path}"
        );
    }
}

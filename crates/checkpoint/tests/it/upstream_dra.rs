//! Upstream DRA state test tables, ported: v1.32 `dra/state/checkpoint_test.go` and the
//! v1.30 `dra/state/state_checkpoint_test.go` (exact expected files and checksums).

use std::collections::{BTreeMap, BTreeSet};

use corral_checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, ClaimInfoState, ClaimInfoStateV130, Device,
    DraManagerCheckpoint, DraManagerCheckpointFile, DraManagerCheckpointV130, DriverState,
    ResourceHandle,
};

const POD: &str = "139cdb46-f989-4f17-9561-ca10cfb509a6";

fn device(name: &str, with_names: bool) -> Device {
    Device {
        pool_name: "worker-1".into(),
        device_name: name.into(),
        share_id: None,
        request_names: with_names.then(|| vec!["test request".to_owned()]),
        cdi_device_ids: with_names.then(|| vec!["example.com/example=cdi-example".to_owned()]),
    }
}

fn claim(uid: &str, name: &str, devices: Vec<Device>) -> ClaimInfoState {
    ClaimInfoState {
        claim_uid: uid.into(),
        claim_name: name.into(),
        namespace: "default".into(),
        pod_uids: Some(BTreeSet::from([POD.to_owned()])),
        driver_state: Some(BTreeMap::from([(
            "test-driver.cdi.k8s.io".to_owned(),
            DriverState {
                devices: Some(devices),
            },
        )])),
    }
}

fn table() -> Vec<(&'static str, DraManagerCheckpoint, &'static str)> {
    vec![
        (
            "single-claim-info-state",
            DraManagerCheckpoint {
                claim_info_state_list: Some(vec![claim(
                    "067798be-454e-4be4-9047-1aa06aea63f7",
                    "example",
                    vec![device("dev-1", true)],
                )]),
            },
            r#"{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":1656016162}"#,
        ),
        (
            "claim-info-state-with-multiple-devices",
            DraManagerCheckpoint {
                claim_info_state_list: Some(vec![claim(
                    "067798be-454e-4be4-9047-1aa06aea63f7",
                    "example",
                    vec![device("dev-1", true), device("dev-2", true)],
                )]),
            },
            r#"{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]},{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-2\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":3369508096}"#,
        ),
        (
            "two-claim-info-states",
            DraManagerCheckpoint {
                claim_info_state_list: Some(vec![
                    claim(
                        "067798be-454e-4be4-9047-1aa06aea63f7",
                        "example-1",
                        vec![device("dev-1", true)],
                    ),
                    claim(
                        "4cf8db2d-06c0-7d70-1a51-e59b25b2c16c",
                        "example-2",
                        vec![device("dev-2", false)],
                    ),
                ]),
            },
            r#"{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example-1\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}},{\"ClaimUID\":\"4cf8db2d-06c0-7d70-1a51-e59b25b2c16c\",\"ClaimName\":\"example-2\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-2\",\"RequestNames\":null,\"CDIDeviceIDs\":null}]}}}]}","Checksum":1582256999}"#,
        ),
    ]
}

/// v1.32 `TestCheckpointStateStore`: the exact files a v1.32 kubelet writes for each claim
/// list ([`DraManagerCheckpoint::encode_v132`]).
#[test]
fn v132_checkpoint_state_store() {
    for (name, list, expected) in table() {
        let bytes = list.encode_v132().unwrap();
        assert_eq!(String::from_utf8(bytes).unwrap(), expected, "{name}");
    }
}

/// What corral writes for the same lists is v1.36's form: the same `Data` with
/// `"ShareID":null` after each `DeviceName`, and the CRC of that.
#[test]
fn v136_store_writes_share_id_null() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    for (name, list, v132) in table() {
        store.create("dramanager_checkpoint_test", &list).unwrap();
        let bytes = store.read_bytes("dramanager_checkpoint_test").unwrap();
        let file = DraManagerCheckpointFile::decode(&bytes).unwrap();
        let old = DraManagerCheckpointFile::decode(v132.as_bytes()).unwrap();
        let mut want = String::new();
        let mut rest = old.data.as_str();
        while let Some(at) = rest.find(r#""RequestNames""#) {
            want.push_str(&rest[..at]);
            want.push_str(r#""ShareID":null,"RequestNames""#);
            rest = &rest[at + r#""RequestNames""#.len()..];
        }
        want.push_str(rest);
        assert_eq!(file.data, want, "{name}");
        assert_eq!(
            file.checksum,
            corral_checkpoint::crc32_ieee(want.as_bytes()),
            "{name}"
        );
        assert_eq!(
            DraManagerCheckpoint::decode(&bytes).unwrap(),
            list,
            "{name}"
        );
    }
    // checkpointer_test.go single-claim-info-state in v1.36's layout (corral's Go replica
    // of upstream's types; see testdata/conformance/checkpoint_dra_v136.json).
    assert_eq!(table()[0].1.checksum().unwrap(), 2570581864);
}

/// A file refused for its checksum.
fn assert_checksum_mismatch<T: std::fmt::Debug>(decoded: Result<T, CheckpointError>) {
    let err = decoded.unwrap_err();
    assert!(err.is_checksum_mismatch(), "{err}");
}

/// v1.32 `TestCheckpointGetOrCreate`: the same files read back, a wrong checksum and
/// invalid JSON refused.
#[test]
fn v132_checkpoint_get_or_create() {
    for (name, list, file) in table() {
        assert_eq!(
            DraManagerCheckpoint::decode(file.as_bytes()).unwrap(),
            list,
            "{name}"
        );
    }
    let incorrect = r#"{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"Entries\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example-1\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}},{\"ClaimUID\":\"4cf8db2d-06c0-7d70-1a51-e59b25b2c16c\",\"ClaimName\":\"example-2\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-2\",\"RequestNames\":null,\"CDIDeviceIDs\":null}]}}}]}","Checksum":2930258365}"#;
    assert_checksum_mismatch(DraManagerCheckpointFile::decode(incorrect.as_bytes()));
    assert!(matches!(
        DraManagerCheckpoint::decode(b"{"),
        Err(CheckpointError::Syntax { message, .. }) if message == "unexpected end of JSON input"
    ));
    // "new-checkpoint": an empty checkpoint has a nil list.
    let empty = DraManagerCheckpointFile::new(&DraManagerCheckpoint::default()).unwrap();
    assert_eq!(
        empty.claim_info_state_list().unwrap().claim_info_state_list,
        None
    );
}

fn v130_claim(
    class: &str,
    uid: &str,
    name: &str,
    handles: Vec<(&str, &str)>,
    cdi: Vec<(&str, &str)>,
) -> ClaimInfoStateV130 {
    ClaimInfoStateV130 {
        driver_name: "test-driver.cdi.k8s.io".into(),
        class_name: class.into(),
        claim_uid: uid.into(),
        claim_name: name.into(),
        namespace: "default".into(),
        pod_uids: Some(BTreeSet::from([POD.to_owned()])),
        resource_handles: Some(
            handles
                .into_iter()
                .map(|(driver, data)| ResourceHandle {
                    driver_name: driver.into(),
                    data: data.into(),
                    structured_data: None,
                })
                .collect(),
        ),
        cdi_devices: Some(
            cdi.into_iter()
                .map(|(d, id)| (d.to_owned(), Some(vec![id.to_owned()])))
                .collect(),
        ),
    }
}

const V130_SINGLE: &str = r#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"ResourceHandles":[{"driverName":"test-driver.cdi.k8s.io","data":"{\"a\": \"b\"}"}],"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example"]}}],"checksum":113577689}"#;

/// v1.30 `TestCheckpointStateStore`: the exact file for one claim with a resource handle.
#[test]
fn v130_checkpoint_state_store() {
    let cp = DraManagerCheckpointV130 {
        version: "v1".into(),
        entries: Some(vec![v130_claim(
            "class-name",
            "067798be-454e-4be4-9047-1aa06aea63f7",
            "example",
            vec![("test-driver.cdi.k8s.io", r#"{"a": "b"}"#)],
            vec![("test-driver.cdi.k8s.io", "example.com/example=cdi-example")],
        )]),
    };
    assert_eq!(
        String::from_utf8(cp.encode().unwrap()).unwrap(),
        V130_SINGLE
    );
}

/// v1.30 `TestCheckpointGetOrCreate`: single claim, multiple devices, multiple claims,
/// invalid checksum, invalid JSON.
#[test]
fn v130_checkpoint_get_or_create() {
    let single = DraManagerCheckpointV130::decode(V130_SINGLE.as_bytes()).unwrap();
    assert_eq!(single.entries.as_ref().map(Vec::len), Some(1));

    let multiple_devices = r#"{"version":"v1","entries":[{"DriverName":"meta-test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"ResourceHandles":[{"driverName":"test-driver-1.cdi.k8s.io","data":"{\"a\": \"b\"}"},{"driverName":"test-driver-2.cdi.k8s.io","data":"{\"c\": \"d\"}"}],"CDIDevices":{"test-driver-1.cdi.k8s.io":["example-1.com/example-1=cdi-example-1"],"test-driver-2.cdi.k8s.io":["example-2.com/example-2=cdi-example-2"]}}],"checksum":1466990255}"#;
    let cp = DraManagerCheckpointV130::decode(multiple_devices.as_bytes()).unwrap();
    assert_eq!(
        cp.entries.unwrap()[0]
            .resource_handles
            .as_ref()
            .map(Vec::len),
        Some(2)
    );

    let multiple_claims = r#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name-1","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example-1","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"ResourceHandles":[{"driverName":"test-driver.cdi.k8s.io","data":"{\"a\": \"b\"}"}],"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example-1"]}},{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name-2","ClaimUID":"4cf8db2d-06c0-7d70-1a51-e59b25b2c16c","ClaimName":"example-2","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"ResourceHandles":[{"driverName":"test-driver.cdi.k8s.io","data":"{\"c\": \"d\"}"}],"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example-2"]}}],"checksum":471181742}"#;
    let cp = DraManagerCheckpointV130::decode(multiple_claims.as_bytes()).unwrap();
    assert_eq!(
        cp.entries.unwrap()[1],
        v130_claim(
            "class-name-2",
            "4cf8db2d-06c0-7d70-1a51-e59b25b2c16c",
            "example-2",
            vec![("test-driver.cdi.k8s.io", r#"{"c": "d"}"#)],
            vec![(
                "test-driver.cdi.k8s.io",
                "example.com/example=cdi-example-2"
            )],
        )
    );

    let invalid_checksum = r#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example"]}}],"checksum":1988120168}"#;
    assert_checksum_mismatch(DraManagerCheckpointV130::decode(
        invalid_checksum.as_bytes(),
    ));
    assert!(matches!(
        DraManagerCheckpointV130::decode(b"{"),
        Err(CheckpointError::Syntax { .. })
    ));
}

/// v1.30 `TestOldCheckpointRestore`: a file without resource handles verifies through the
/// legacy checksum and is rewritten with `"ResourceHandles":null` and a new checksum.
#[test]
fn v130_old_checkpoint_restore() {
    let old = r#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example"]}}],"checksum":153446146}"#;
    let cp = DraManagerCheckpointV130::decode(old.as_bytes()).unwrap();
    let expected = r#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"ResourceHandles":null,"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example"]}}],"checksum":453625682}"#;
    assert_eq!(String::from_utf8(cp.encode().unwrap()).unwrap(), expected);
    // And our legacy writer reproduces the old file exactly.
    assert_eq!(
        String::from_utf8(cp.encode_without_resource_handles().unwrap()).unwrap(),
        old
    );
}

//! Round trips of every DRAPlugin message through the other version, checked against the
//! wire: both versions share field numbers, so prost decoding one version's bytes as the
//! other is the conversion's oracle — a field the conversion loses, swaps or invents makes
//! these tests fail.

use std::collections::HashMap;

use proptest::prelude::*;
use prost::Message;

use crate::dra::{v1, v1beta1};

/// The conversion agrees with re-decoding the bytes as the other version, and converting
/// back gives the original.
fn check_lossless<B, V>(beta: B)
where
    B: Message + Default + PartialEq + Clone + From<V> + std::fmt::Debug,
    V: Message + Default + PartialEq + Clone + From<B> + std::fmt::Debug,
{
    let converted = V::from(beta.clone());
    let decoded = V::decode(beta.encode_to_vec().as_slice()).expect("v1beta1 bytes decode as v1");
    assert_eq!(converted, decoded, "v1beta1 → v1 differs from the wire");
    assert_eq!(
        B::from(converted),
        beta,
        "v1beta1 → v1 → v1beta1 lost something"
    );
}

fn claim(n: u8) -> v1beta1::Claim {
    v1beta1::Claim {
        namespace: format!("ns-{n}"),
        uid: format!("uid-{n}"),
        name: format!("name-{n}"),
    }
}

fn device(n: u8) -> v1beta1::Device {
    v1beta1::Device {
        request_names: vec![format!("req-{n}"), format!("req-{n}b")],
        pool_name: format!("pool-{n}"),
        device_name: format!("dev-{n}"),
        cdi_device_ids: vec![format!("v.com/c=dev-{n}")],
    }
}

// Every field set, every value distinct: a dropped or swapped field cannot go unnoticed.
#[test]
fn every_message_survives_a_round_trip_through_v1() {
    check_lossless::<_, v1::Claim>(claim(1));
    check_lossless::<_, v1::Device>(device(1));
    check_lossless::<_, v1::NodePrepareResourcesRequest>(v1beta1::NodePrepareResourcesRequest {
        claims: vec![claim(1), claim(2)],
    });
    check_lossless::<_, v1::NodeUnprepareResourcesRequest>(
        v1beta1::NodeUnprepareResourcesRequest {
            claims: vec![claim(3), claim(4)],
        },
    );
    let prepared = v1beta1::NodePrepareResourceResponse {
        devices: vec![device(1), device(2)],
        error: "no".into(),
    };
    check_lossless::<_, v1::NodePrepareResourceResponse>(prepared.clone());
    check_lossless::<_, v1::NodePrepareResourcesResponse>(v1beta1::NodePrepareResourcesResponse {
        claims: HashMap::from([
            ("uid-1".into(), prepared),
            ("uid-2".into(), Default::default()),
        ]),
    });
    let unprepared = v1beta1::NodeUnprepareResourceResponse {
        error: "busy".into(),
    };
    check_lossless::<_, v1::NodeUnprepareResourceResponse>(unprepared.clone());
    check_lossless::<_, v1::NodeUnprepareResourcesResponse>(
        v1beta1::NodeUnprepareResourcesResponse {
            claims: HashMap::from([
                ("uid-1".into(), unprepared),
                ("uid-2".into(), Default::default()),
            ]),
        },
    );
}

// v1 → v1beta1 drops exactly `share_id`, as a v1beta1 decoder of v1 bytes does.
#[test]
fn v1_device_loses_only_its_share_id() {
    let mut v1_device = v1::Device::from(device(7));
    v1_device.share_id = Some("share-7".into());
    let beta = v1beta1::Device::from(v1_device.clone());
    assert_eq!(beta, device(7));
    assert_eq!(
        beta,
        v1beta1::Device::decode(v1_device.encode_to_vec().as_slice()).unwrap()
    );
    let back = v1::Device::from(beta);
    assert_eq!(back.share_id, None);
    assert_eq!(
        back,
        v1::Device {
            share_id: None,
            ..v1_device
        }
    );
}

fn text() -> impl Strategy<Value = String> {
    "[a-z0-9./=-]{0,6}"
}

fn claim_strategy() -> impl Strategy<Value = v1beta1::Claim> {
    (text(), text(), text()).prop_map(|(namespace, uid, name)| v1beta1::Claim {
        namespace,
        uid,
        name,
    })
}

fn device_strategy() -> impl Strategy<Value = v1beta1::Device> {
    let list = || proptest::collection::vec(text(), 0..3);
    (list(), text(), text(), list()).prop_map(
        |(request_names, pool_name, device_name, cdi_device_ids)| v1beta1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
        },
    )
}

fn prepare_response_strategy() -> impl Strategy<Value = v1beta1::NodePrepareResourcesResponse> {
    let one = (proptest::collection::vec(device_strategy(), 0..3), text())
        .prop_map(|(devices, error)| v1beta1::NodePrepareResourceResponse { devices, error });
    proptest::collection::hash_map(text(), one, 0..4)
        .prop_map(|claims| v1beta1::NodePrepareResourcesResponse { claims })
}

fn unprepare_response_strategy() -> impl Strategy<Value = v1beta1::NodeUnprepareResourcesResponse> {
    let one = text().prop_map(|error| v1beta1::NodeUnprepareResourceResponse { error });
    proptest::collection::hash_map(text(), one, 0..4)
        .prop_map(|claims| v1beta1::NodeUnprepareResourcesResponse { claims })
}

proptest! {
    #[test]
    fn requests_round_trip(claims in proptest::collection::vec(claim_strategy(), 0..4)) {
        check_lossless::<_, v1::NodePrepareResourcesRequest>(
            v1beta1::NodePrepareResourcesRequest { claims: claims.clone() },
        );
        check_lossless::<_, v1::NodeUnprepareResourcesRequest>(
            v1beta1::NodeUnprepareResourcesRequest { claims },
        );
    }

    #[test]
    fn responses_round_trip(
        prepared in prepare_response_strategy(),
        unprepared in unprepare_response_strategy(),
    ) {
        check_lossless::<_, v1::NodePrepareResourcesResponse>(prepared);
        check_lossless::<_, v1::NodeUnprepareResourcesResponse>(unprepared);
    }

    #[test]
    fn v1_responses_match_the_v1beta1_wire(
        prepared in prepare_response_strategy(),
        share_id in proptest::option::of(text()),
    ) {
        // v1 answers (with share ids) converted to v1beta1 equal their bytes decoded as
        // v1beta1.
        let mut v1_answer = v1::NodePrepareResourcesResponse::from(prepared);
        for device in v1_answer.claims.values_mut().flat_map(|c| c.devices.iter_mut()) {
            device.share_id = share_id.clone();
        }
        let converted = v1beta1::NodePrepareResourcesResponse::from(v1_answer.clone());
        let decoded =
            v1beta1::NodePrepareResourcesResponse::decode(v1_answer.encode_to_vec().as_slice())
                .unwrap();
        prop_assert_eq!(converted, decoded);
    }
}

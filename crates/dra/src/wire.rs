//! The crate's types as DRAPlugin v1 messages, the one API version spoken inside the crate.
//! Other versions are adapted at the edge by corral-proto's wrappers
//! (`corral_proto::dra::v1beta1::{V1Beta1ClientWrapper, V1ServerWrapper}`): a new version
//! costs one adapter there and one [`DraService`](crate::DraService) arm, not a copy of the
//! client or the sample driver.

use corral_proto::dra::v1;

use crate::claim::ClaimRef;
use crate::claim_info::PreparedDevice;

impl From<&ClaimRef> for v1::Claim {
    fn from(claim: &ClaimRef) -> Self {
        v1::Claim {
            namespace: claim.namespace.clone(),
            uid: claim.uid.clone(),
            name: claim.name.clone(),
        }
    }
}

impl From<v1::Device> for PreparedDevice {
    fn from(device: v1::Device) -> Self {
        let v1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
            share_id,
        } = device;
        PreparedDevice {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
            share_id,
        }
    }
}

impl From<PreparedDevice> for v1::Device {
    fn from(device: PreparedDevice) -> Self {
        let PreparedDevice {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
            share_id,
        } = device;
        v1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
            share_id,
        }
    }
}

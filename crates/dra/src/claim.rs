//! What the caller tells the DRA manager: the pod with its resource claims resolved to claim
//! names ([`PodClaims`]), and each `ResourceClaim` object's identity, allocation result and
//! `reservedFor` list ([`ResourceClaim`]).
//!
//! corral has no API server client: the agent's admission API supplies these, and the
//! manager never invents them.

use std::collections::BTreeMap;

use corral_topology::Pod;

use crate::error::DraManagerError;

/// A claim's identity as the DRA gRPC API carries it (`Claim{namespace, uid, name}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimRef {
    /// Namespace of the claim.
    pub namespace: String,
    /// Name of the claim.
    pub name: String,
    /// uid of the claim.
    pub uid: String,
}

impl ClaimRef {
    /// `namespace/name`, the claim cache key.
    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }
}

/// The claim cache key: `namespace/claimName`, as upstream.
pub fn claim_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// One device of a claim's allocation result (`DeviceRequestAllocationResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct AllocatedDevice {
    /// The claim request this device satisfies.
    pub request: String,
    /// The DRA driver that owns the device.
    pub driver: String,
    /// The resource pool of the device.
    pub pool: String,
    /// The device name within the pool.
    pub device: String,
}

/// A consumer a claim is reserved for (`ResourceClaimConsumerReference`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConsumerRef {
    /// The consumer's resource, `pods` for a pod.
    pub resource: String,
    /// The consumer's name.
    pub name: String,
    /// The consumer's uid; this is what is checked, as upstream's `IsReservedForPod`.
    pub uid: String,
}

impl ConsumerRef {
    /// A pod consumer.
    pub fn pod(name: impl Into<String>, uid: impl Into<String>) -> Self {
        ConsumerRef {
            resource: "pods".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// A `ResourceClaim` object as the caller supplies it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceClaim {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `status.allocation.devices.results`; `None` when the claim is not allocated.
    pub allocation: Option<Vec<AllocatedDevice>>,
    /// `status.reservedFor`.
    pub reserved_for: Vec<ConsumerRef>,
}

impl ResourceClaim {
    /// The claim's identity.
    pub fn claim_ref(&self) -> ClaimRef {
        ClaimRef {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
        }
    }

    /// `namespace/name`, the claim cache key.
    pub fn key(&self) -> String {
        claim_key(&self.namespace, &self.name)
    }

    /// Whether `pod_uid` is in `reservedFor` (upstream `resourceclaim.IsReservedForPod`).
    pub fn is_reserved_for(&self, pod_uid: &str) -> bool {
        self.reserved_for.iter().any(|c| c.uid == pod_uid)
    }
}

/// One entry of `pod.spec.resourceClaims`, resolved to the claim object it names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodClaim {
    /// The pod-level name containers refer to.
    pub name: String,
    /// The `ResourceClaim` object's name; `None` when no claim was generated (nothing to
    /// prepare), as upstream's `resourceclaim.Name` can answer.
    pub claim_name: Option<String>,
}

/// A pod as the DRA manager sees it: identity and resolved resource claims.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodClaims {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace` (also every claim's namespace).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.resourceClaims`, resolved.
    pub claims: Vec<PodClaim>,
}

impl PodClaims {
    /// Resolve `pod.resource_claims` as upstream's `resourceclaim.Name`: a direct
    /// `resourceClaimName` is used as is; a template-generated claim takes its name from
    /// `generated` (the pod status' `resourceClaimStatuses`: pod claim name → generated
    /// name, `None` when no claim was needed); a template claim missing there is an error.
    pub fn from_pod(
        pod: &Pod,
        generated: &BTreeMap<String, Option<String>>,
    ) -> Result<Self, DraManagerError> {
        let mut claims = Vec::with_capacity(pod.resource_claims.len());
        for pc in &pod.resource_claims {
            let claim_name = if let Some(name) = &pc.resource_claim_name {
                Some(name.clone())
            } else if pc.resource_claim_template_name.is_some() {
                match generated.get(&pc.name) {
                    Some(name) => name.clone(),
                    None => {
                        return Err(DraManagerError::NoGeneratedName {
                            pod: format!("{}/{}", pod.namespace, pod.name),
                            pod_claim: pc.name.clone(),
                        });
                    }
                }
            } else {
                return Err(DraManagerError::InvalidPodClaim {
                    pod: format!("{}/{}", pod.namespace, pod.name),
                    pod_claim: pc.name.clone(),
                });
            };
            claims.push(PodClaim {
                name: pc.name.clone(),
                claim_name,
            });
        }
        Ok(PodClaims {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            claims,
        })
    }

    /// `namespace/name`, for messages.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_topology::PodResourceClaim;

    fn pod(claims: Vec<PodResourceClaim>) -> Pod {
        Pod {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            resource_claims: claims,
            ..Pod::default()
        }
    }

    #[test]
    fn resolves_direct_generated_and_skipped_claims() {
        let p = pod(vec![
            PodResourceClaim {
                name: "a".into(),
                resource_claim_name: Some("claim-a".into()),
                resource_claim_template_name: None,
            },
            PodResourceClaim {
                name: "b".into(),
                resource_claim_name: None,
                resource_claim_template_name: Some("tmpl".into()),
            },
            PodResourceClaim {
                name: "c".into(),
                resource_claim_name: None,
                resource_claim_template_name: Some("tmpl".into()),
            },
        ]);
        let generated = BTreeMap::from([
            ("b".to_owned(), Some("p-b-xyz".to_owned())),
            ("c".to_owned(), None),
        ]);
        let resolved = PodClaims::from_pod(&p, &generated).unwrap();
        let names: Vec<_> = resolved
            .claims
            .iter()
            .map(|c| c.claim_name.clone())
            .collect();
        assert_eq!(
            names,
            vec![Some("claim-a".into()), Some("p-b-xyz".into()), None]
        );
    }

    #[test]
    fn template_claim_without_status_is_an_error() {
        let p = pod(vec![PodResourceClaim {
            name: "b".into(),
            resource_claim_name: None,
            resource_claim_template_name: Some("tmpl".into()),
        }]);
        let err = PodClaims::from_pod(&p, &BTreeMap::new()).unwrap_err();
        assert!(
            matches!(err, DraManagerError::NoGeneratedName { ref pod_claim, .. } if pod_claim == "b")
        );
        let p = pod(vec![PodResourceClaim {
            name: "x".into(),
            ..PodResourceClaim::default()
        }]);
        assert!(matches!(
            PodClaims::from_pod(&p, &BTreeMap::new()),
            Err(DraManagerError::InvalidPodClaim { .. })
        ));
    }

    #[test]
    fn reserved_for_checks_the_uid() {
        let claim = ResourceClaim {
            reserved_for: vec![ConsumerRef::pod("other-name", "uid-1")],
            ..ResourceClaim::default()
        };
        assert!(claim.is_reserved_for("uid-1"));
        assert!(!claim.is_reserved_for("uid-2"));
    }
}

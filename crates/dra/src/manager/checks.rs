//! What the manager checks around a driver call: the pod's claims before (supplied,
//! reserved for the pod), the driver's answer after (every claim of the batch and no
//! other), and how claims and failures are named in errors and logs.

use std::collections::{BTreeMap, BTreeSet};

use crate::claim::{ClaimRef, PodClaims, ResourceClaim, claim_key};
use crate::error::{DraManagerError, DriverAnswer, DriverCallError, SkippedClaims};

/// The supplied claims the pod names, checked for reservation; deduplicated by name.
pub(super) fn resolve_claims<'a>(
    pod: &PodClaims,
    claims: &'a [ResourceClaim],
) -> Result<Vec<&'a ResourceClaim>, DraManagerError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for pod_claim in &pod.claims {
        let Some(name) = &pod_claim.claim_name else {
            tracing::trace!(pod = %pod.display_name(), pod_claim = %pod_claim.name, "no claim generated, nothing to prepare");
            continue;
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        let claim = claims
            .iter()
            .find(|c| &c.name == name && c.namespace == pod.namespace)
            .ok_or_else(|| DraManagerError::ClaimNotSupplied {
                pod: pod.display_name(),
                pod_uid: pod.uid.clone(),
                claim: claim_key(&pod.namespace, name),
            })?;
        if !claim.is_reserved_for(&pod.uid) {
            return Err(DraManagerError::NotReserved {
                pod: pod.display_name(),
                pod_uid: pod.uid.clone(),
                claim: claim.key(),
                claim_uid: claim.uid.clone(),
            });
        }
        out.push(claim);
    }
    Ok(out)
}

/// A driver's answer to a call for `batch`: the call must have succeeded, and the answer
/// must name no claim outside the batch (upstream checks each result as it goes; the first
/// unknown uid is the error).
pub(super) fn check_answer<T>(
    call: &'static str,
    driver: &str,
    pod: &str,
    batch: &[ClaimRef],
    answer: Result<BTreeMap<String, T>, DriverCallError>,
) -> Result<BTreeMap<String, T>, DraManagerError> {
    let results = answer.map_err(|source| DraManagerError::DriverCall {
        call,
        driver: driver.to_owned(),
        pod: pod.to_owned(),
        claims: list(batch),
        source,
    })?;
    if let Some(unknown) = results
        .keys()
        .find(|uid| !batch.iter().any(|c| &c.uid == *uid))
    {
        return Err(DraManagerError::UnknownClaimInResponse {
            call,
            claim_uid: unknown.clone(),
            detail: DriverAnswer {
                driver: driver.to_owned(),
                pod: pod.to_owned(),
            },
        });
    }
    Ok(results)
}

/// The answer must have an entry for every claim of the batch (upstream: `unfinished :=
/// len(claims) - len(response.Claims)`, checked after the per-claim results). An answer
/// with no unknown uid that is short names the claims it lacks.
pub(super) fn check_skipped<T>(
    call: &'static str,
    driver: &str,
    pod: &str,
    batch: &[ClaimRef],
    results: &BTreeMap<String, T>,
) -> Result<(), DraManagerError> {
    let missing: Vec<String> = batch
        .iter()
        .filter(|c| !results.contains_key(&c.uid))
        .map(|c| format!("{} ({})", c.key(), c.uid))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(DraManagerError::ClaimsSkipped {
        call,
        skipped: missing.len(),
        detail: SkippedClaims {
            driver: driver.to_owned(),
            pod: pod.to_owned(),
            claims: missing,
        },
    })
}

pub(super) fn claim_failed(
    call: &'static str,
    driver: &str,
    pod: &str,
    claim: &ClaimRef,
    message: &str,
) -> DraManagerError {
    DraManagerError::ClaimFailed {
        call,
        driver: driver.to_owned(),
        pod: pod.to_owned(),
        claim: claim.key(),
        message: message.to_owned(),
    }
}

pub(super) fn list(batch: &[ClaimRef]) -> String {
    batch
        .iter()
        .map(ClaimRef::key)
        .collect::<Vec<_>>()
        .join(",")
}

//! Real Kubernetes manifests in, corral's vocabulary out: Pods (`v1`) and ResourceClaims
//! (`resource.k8s.io/v1`, `v1beta2` or `v1beta1`, with `status.allocation` and
//! `status.reservedFor`), read from multi-document YAML or JSON with `k8s-openapi`'s types.

mod claim;
mod extended_resources;
mod pod;
mod slice;
mod validate;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

pub(crate) use claim::{CLAIM_API_VERSIONS, ClaimManifest, claim_from_document};
pub(crate) use pod::{PodConversionError, pod_from_manifest};
pub(crate) use slice::{SLICE_API_VERSION, claim_numa_nodes, slice_from_document};

/// Why a manifest could not be used; names the document and what is wrong.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestError {
    /// Not YAML or JSON.
    #[error("{source_name}: not valid YAML or JSON: {message}")]
    Syntax {
        /// The file (or "stdin").
        source_name: String,
        /// The parser's message.
        message: String,
    },
    /// A document of a kind corral does not read.
    #[error(
        "{source_name}, document {index}: kind {kind:?} (apiVersion {api_version:?}) is not a v1 Pod or a ResourceClaim of resource.k8s.io/v1, v1beta2 or v1beta1"
    )]
    UnsupportedKind {
        /// The file.
        source_name: String,
        /// 1-based document number.
        index: usize,
        /// Its `kind`.
        kind: String,
        /// Its `apiVersion`.
        api_version: String,
    },
    /// A document of a known kind whose fields do not fit the Kubernetes type.
    #[error("{source_name}, document {index} ({kind}): {message}")]
    Invalid {
        /// The file.
        source_name: String,
        /// 1-based document number.
        index: usize,
        /// Its `kind`.
        kind: String,
        /// What does not fit.
        message: String,
    },
}

/// Everything read from one or more manifest files.
#[derive(Debug, Default)]
pub(crate) struct Manifests {
    /// Pods, in file order.
    pub(crate) pods: Vec<K8sPod>,
    /// ResourceClaims, in file order.
    pub(crate) claims: Vec<K8sResourceClaim>,
    /// ResourceSlices (the NUMA nodes of the claims' devices), in file order.
    pub(crate) slices: Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
}

impl Manifests {
    /// Add every document of `text` (YAML, possibly several documents, or JSON; `kind: List`
    /// is unpacked).
    pub(crate) fn add_text(&mut self, source_name: &str, text: &str) -> Result<(), ManifestError> {
        let documents: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(text).map_err(|err| ManifestError::Syntax {
                source_name: source_name.to_owned(),
                message: err.to_string(),
            })?;
        for (i, document) in documents.into_iter().enumerate() {
            self.add_document(source_name, i + 1, document)?;
        }
        Ok(())
    }

    fn add_document(
        &mut self,
        source_name: &str,
        index: usize,
        document: serde_json::Value,
    ) -> Result<(), ManifestError> {
        if document.is_null() {
            return Ok(());
        }
        let field = |name: &str| {
            document
                .get(name)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned()
        };
        let (kind, api_version) = (field("kind"), field("apiVersion"));
        let invalid = |message: String| ManifestError::Invalid {
            source_name: source_name.to_owned(),
            index,
            kind: kind.clone(),
            message,
        };
        match (kind.as_str(), api_version.as_str()) {
            ("Pod", "v1") => {
                let pod = serde_json::from_value(document).map_err(|e| invalid(e.to_string()))?;
                self.pods.push(pod);
            }
            ("ResourceClaim", version) if CLAIM_API_VERSIONS.contains(&version) => {
                let claim = claim_from_document(document).map_err(|e| invalid(e.to_string()))?;
                self.claims.push(claim);
            }
            ("ResourceSlice", SLICE_API_VERSION) => {
                let slice = slice_from_document(document).map_err(|e| invalid(e.to_string()))?;
                self.slices.push(slice);
            }
            ("List", "v1") => {
                let items = document
                    .get("items")
                    .and_then(|i| i.as_array())
                    .cloned()
                    .unwrap_or_default();
                for item in items {
                    self.add_document(source_name, index, item)?;
                }
            }
            _ => {
                return Err(ManifestError::UnsupportedKind {
                    source_name: source_name.to_owned(),
                    index,
                    kind,
                    api_version,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

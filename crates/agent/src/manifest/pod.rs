//! A Kubernetes Pod → corral's [`Pod`], with the API server's defaulting applied first
//! (requests default to limits), as the kubelet's managers only ever see defaulted pods.

use std::collections::BTreeMap;

use corral_topology::{
    Container, ContainerClaim, ContainerRestartPolicy, Pod, PodResourceClaim, ResourceList,
    ResourceRequirements,
};
use k8s_openapi::api::core::v1::{
    Container as K8sContainer, Pod as K8sPod, ResourceRequirements as K8sResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::validate::{self, Level};
use crate::config::PodLimits;

/// `text` with control characters escaped, for error messages.
fn printable(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.escape_debug().to_string()
    } else {
        text.to_owned()
    }
}

/// Why a Pod could not be converted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PodConversionError {
    /// The manifest has no `metadata.name`.
    #[error("the pod has no metadata.name")]
    MissingName,
    /// A quantity does not parse: where (pod, container, resource, request or limit, value)
    /// and why.
    #[error("{at}: {message}")]
    Quantity {
        /// `pod NS/NAME, container C: RESOURCE request|limit "VALUE"`.
        at: String,
        /// Why it does not parse.
        message: String,
    },
    /// No uid was given and none could be generated.
    #[error("cannot generate a uid for pod {0}")]
    Uid(String, #[source] std::io::Error),
    /// A field the API server would refuse, in its words: `pod NS/NAME: FIELD: WHY`.
    #[error("pod {pod}: {field}: {why}")]
    Invalid {
        /// `namespace/name` as given.
        pod: String,
        /// The field path, e.g. `spec.containers[1].name`.
        field: String,
        /// Why, e.g. `Duplicate value: "c"`.
        why: String,
    },
    /// More containers than `maxContainersPerPod` allows.
    #[error(
        "pod {pod}: {count} containers (init and app together) exceed maxContainersPerPod ({max})"
    )]
    TooManyContainers {
        /// `namespace/name`.
        pod: String,
        /// How many it has.
        count: usize,
        /// The limit.
        max: usize,
    },
}

/// Convert `manifest`, validated as the API server validates what the managers read (names,
/// uids, container names, quantities, requests against limits) and bounded by `limits`; a
/// manifest without `metadata.uid` gets a fresh random one.
pub(crate) fn pod_from_manifest(
    manifest: &K8sPod,
    limits: &PodLimits,
) -> Result<Pod, PodConversionError> {
    let metadata = &manifest.metadata;
    let name = metadata
        .name
        .clone()
        .ok_or(PodConversionError::MissingName)?;
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let full_name = format!("{}/{}", printable(&namespace), printable(&name));
    let invalid = |field: &str, why: String| PodConversionError::Invalid {
        pod: full_name.clone(),
        field: field.to_owned(),
        why,
    };
    if let Err(why) = validate::dns_subdomain(&name) {
        return Err(invalid("metadata.name", why.to_string()));
    }
    if let Err(why) = validate::dns_label(&namespace) {
        return Err(invalid("metadata.namespace", why.to_string()));
    }
    let uid = match metadata.uid.clone().filter(|u| !u.is_empty()) {
        Some(uid) => {
            validate::uid(&uid).map_err(|why| invalid("metadata.uid", why.to_string()))?;
            uid
        }
        None => random_uid().map_err(|e| PodConversionError::Uid(full_name.clone(), e))?,
    };
    let spec = manifest.spec.clone().unwrap_or_default();
    let count = spec.containers.len() + spec.init_containers.as_ref().map_or(0, Vec::len);
    if count > limits.max_containers {
        return Err(PodConversionError::TooManyContainers {
            pod: full_name,
            count,
            max: limits.max_containers,
        });
    }
    if spec.containers.is_empty() {
        return Err(invalid("spec.containers", "Required value".to_owned()));
    }
    let mut names = std::collections::HashSet::with_capacity(count);
    let all = || {
        spec.init_containers
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| ("initContainers", i, c))
            .chain(
                spec.containers
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ("containers", i, c)),
            )
    };
    for (list, i, c) in all() {
        let field = format!("spec.{list}[{i}].name");
        validate::dns_label(&c.name).map_err(|why| invalid(&field, why.to_string()))?;
        if !names.insert(c.name.as_str()) {
            return Err(invalid(&field, format!("Duplicate value: {:?}", c.name)));
        }
    }
    let convert = |c: &K8sContainer| container(&full_name, c);
    let init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .map(convert)
        .collect::<Result<_, _>>()?;
    let containers = spec
        .containers
        .iter()
        .map(convert)
        .collect::<Result<_, _>>()?;
    let resources = match &spec.resources {
        Some(r) => Some(requirements(
            &full_name,
            "(pod)",
            r.requests.as_ref(),
            r.limits.as_ref(),
        )?),
        None => None,
    };
    // The quantities parse (converted above); now the API server's rules between them.
    for (list, i, c) in all() {
        let (requests, limits) = defaulted(c.resources.as_ref());
        let path = format!("spec.{list}[{i}].resources");
        validate::resource_requirements(&path, &requests, &limits, Level::Container)
            .map_err(|(field, why)| invalid(&field, why))?;
    }
    if spec.resources.is_some() {
        let (requests, limits) = defaulted(spec.resources.as_ref());
        validate::resource_requirements("spec.resources", &requests, &limits, Level::Pod)
            .map_err(|(field, why)| invalid(&field, why))?;
        let containers: Vec<_> = spec
            .containers
            .iter()
            .map(|c| defaulted(c.resources.as_ref()).1)
            .collect();
        validate::container_limits_within_pod_limits(&limits, &containers)
            .map_err(|(field, why)| invalid(&field, why))?;
    }
    let resource_claims = spec
        .resource_claims
        .iter()
        .flatten()
        .map(|c| PodResourceClaim {
            name: c.name.clone(),
            resource_claim_name: c.resource_claim_name.clone(),
            resource_claim_template_name: c.resource_claim_template_name.clone(),
        })
        .collect();
    let mut pod = Pod {
        uid,
        namespace,
        name,
        init_containers,
        containers,
        resources,
        resource_claims,
    };
    if limits.dra_extended_resources {
        super::extended_resources::apply(&mut pod, manifest)
            .map_err(|(field, why)| invalid(&field, why))?;
    }
    Ok(pod)
}

fn container(pod: &str, c: &K8sContainer) -> Result<Container, PodConversionError> {
    let resources = c.resources.clone().unwrap_or_default();
    Ok(Container {
        name: c.name.clone(),
        restart_policy: (c.restart_policy.as_deref() == Some("Always"))
            .then_some(ContainerRestartPolicy::Always),
        resources: requirements(
            pod,
            &c.name,
            resources.requests.as_ref(),
            resources.limits.as_ref(),
        )?,
        claims: resources
            .claims
            .iter()
            .flatten()
            .map(|claim| ContainerClaim {
                name: claim.name.clone(),
                request: claim.request.clone().filter(|r| !r.is_empty()),
            })
            .collect(),
    })
}

/// The quantities as written: requests defaulted from limits per resource (the API server's
/// defaulting), and limits.
fn defaulted(
    resources: Option<&K8sResourceRequirements>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let text = |map: Option<&BTreeMap<String, Quantity>>| -> BTreeMap<String, String> {
        map.into_iter()
            .flatten()
            .map(|(name, Quantity(value))| (name.clone(), value.clone()))
            .collect()
    };
    let limits = text(resources.and_then(|r| r.limits.as_ref()));
    let mut requests = text(resources.and_then(|r| r.requests.as_ref()));
    for (name, value) in &limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
    (requests, limits)
}

/// Requests and limits, with requests defaulted from limits per resource (API server rule).
fn requirements(
    pod: &str,
    container: &str,
    requests: Option<&BTreeMap<String, Quantity>>,
    limits: Option<&BTreeMap<String, Quantity>>,
) -> Result<ResourceRequirements, PodConversionError> {
    let limits_map = limits.cloned().unwrap_or_default();
    let mut requests_map = requests.cloned().unwrap_or_default();
    for (name, quantity) in &limits_map {
        requests_map
            .entry(name.clone())
            .or_insert_with(|| quantity.clone());
    }
    Ok(ResourceRequirements {
        requests: list(pod, container, "request", &requests_map)?,
        limits: list(pod, container, "limit", &limits_map)?,
    })
}

fn list(
    pod: &str,
    container: &str,
    kind: &'static str,
    map: &BTreeMap<String, Quantity>,
) -> Result<ResourceList, PodConversionError> {
    let mut list = ResourceList::default();
    for (name, Quantity(value)) in map {
        let parsed = match name.as_str() {
            "cpu" => corral_topology::parse_cpu_millis(value),
            "memory" => corral_topology::parse_bytes(value),
            _ => corral_topology::parse_count(value),
        };
        let at = || format!("pod {pod}, container {container}: {name} {kind} {value:?}");
        let amount = parsed.map_err(|err| PodConversionError::Quantity {
            at: at(),
            message: err.to_string(),
        })?;
        if amount < 0 {
            return Err(PodConversionError::Quantity {
                at: at(),
                message: "must be greater than or equal to 0".to_owned(),
            });
        }
        match name.as_str() {
            "cpu" => list.cpu_millis = Some(amount),
            "memory" => list.memory_bytes = Some(amount),
            _ => {
                list.extended.insert(name.clone(), amount);
            }
        }
    }
    Ok(list)
}

/// A random RFC 9562 (RFC 4122) version 4 uid, from the operating system's random source
/// (`getrandom`: portable, no `/proc` read).
fn random_uid() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string())
}

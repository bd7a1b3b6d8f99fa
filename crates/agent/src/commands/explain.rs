//! `corral explain -f FILE…`: what corral reads from Pod and ResourceClaim manifests — the
//! API server's defaulting applied, QoS class, each container's kind, resources and claims.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use corral_topology::{ContainerKind, Pod, QosClass, ResourceList};

use crate::cli::OutputFormat;
use crate::commands::print_document;
use crate::config::PodLimits;
use crate::manifest::{ClaimManifest, Manifests, pod_from_manifest};
use crate::output::outln;

/// Read every file (`-` is stdin) into one set of manifests.
pub(crate) fn read_manifests(files: &[PathBuf]) -> Result<Manifests> {
    let mut manifests = Manifests::default();
    for file in files {
        let (name, text) = if file.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading stdin")?;
            ("stdin".to_owned(), text)
        } else {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            (file.display().to_string(), text)
        };
        manifests.add_text(&name, &text)?;
    }
    Ok(manifests)
}

/// The uid `explain` shows for a pod manifest without `metadata.uid`: stable across runs, a
/// name-based RFC 9562 version 5 UUID (SHA-1) of `urn:corral:pod:NAMESPACE/NAME` in the URL
/// namespace (`6ba7b811-9dad-11d1-80b4-00c04fd430c8`); e.g. `default/web` is
/// `37343419-00bc-5c20-a7dd-98d73126c4a2` (as Python's
/// `uuid.uuid5(uuid.NAMESPACE_URL, "urn:corral:pod:default/web")`). The namespace defaults to
/// `default`, as the API server's. `admit` still gives such a pod a fresh random uid, as
/// the API server gives each created pod its own.
pub(crate) fn stable_pod_uid(namespace: &str, name: &str) -> String {
    let urn = format!("urn:corral:pod:{namespace}/{name}");
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, urn.as_bytes())
        .hyphenated()
        .to_string()
}

/// The pods of `manifests` as corral reads them; a pod without a uid gets its stable uid.
fn explained_pods(manifests: &Manifests) -> Result<Vec<Pod>> {
    manifests
        .pods
        .iter()
        .map(|manifest| {
            let mut manifest = manifest.clone();
            let metadata = &mut manifest.metadata;
            if metadata.uid.as_deref().is_none_or(str::is_empty)
                && let Some(name) = &metadata.name
            {
                let namespace = metadata.namespace.as_deref().unwrap_or("default");
                metadata.uid = Some(stable_pod_uid(namespace, name));
            }
            Ok(pod_from_manifest(&manifest, &PodLimits::DEFAULT)?)
        })
        .collect()
}

pub(crate) fn run(files: &[PathBuf], output: OutputFormat) -> Result<ExitCode> {
    let manifests = read_manifests(files)?;
    let pods = explained_pods(&manifests)?;
    let claims: Vec<ClaimManifest> = manifests
        .claims
        .iter()
        .map(ClaimManifest::from_k8s)
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    match output {
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc = document(&pods, &claims);
            print_document(&doc, output == OutputFormat::Yaml)?;
        }
        OutputFormat::Table | OutputFormat::Wide => {
            for line in text(&pods, &claims, output == OutputFormat::Wide) {
                outln!("{line}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The document of `-o json|yaml` (camelCase keys).
fn document(pods: &[Pod], claims: &[ClaimManifest]) -> serde_json::Value {
    serde_json::json!({
        "pods": pods.iter().map(pod_json).collect::<Vec<_>>(),
        "claims": claims.iter().map(claim_json).collect::<Vec<_>>(),
    })
}

/// The table's lines; `wide` adds each pod's claim names and each container's devices
/// (from the ResourceClaim manifests given beside the pod).
fn text(pods: &[Pod], claims: &[ClaimManifest], wide: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for pod in pods {
        let mut line = format!(
            "pod {}/{} uid {} qos {}",
            pod.namespace,
            pod.name,
            pod.uid,
            qos_name(pod.qos_class())
        );
        if wide && !pod.resource_claims.is_empty() {
            let names: Vec<String> = pod
                .resource_claims
                .iter()
                .map(|c| format!("{}={}", c.name, claim_object(c)))
                .collect();
            line.push_str(&format!("  resourceClaims {}", names.join(",")));
        }
        lines.push(line);
        for (kind, container) in pod.all_containers() {
            let mut line = format!(
                "  {:<8} {:<20} requests {}  limits {}",
                kind_name(kind),
                container.name,
                list_text(&container.resources.requests),
                list_text(&container.resources.limits),
            );
            if !container.claims.is_empty() {
                let names: Vec<String> = container
                    .claims
                    .iter()
                    .map(|c| match &c.request {
                        Some(r) => format!("{}/{r}", c.name),
                        None => c.name.clone(),
                    })
                    .collect();
                line.push_str(&format!("  claims {}", names.join(",")));
                if wide {
                    let devices = container_devices(pod, container, claims);
                    line.push_str(&format!(
                        "  devices {}",
                        if devices.is_empty() {
                            "- (no allocated claim given)".to_owned()
                        } else {
                            devices.join(",")
                        }
                    ));
                }
            }
            lines.push(line);
        }
    }
    for claim in claims {
        lines.push(format!(
            "claim {}/{} uid {}",
            claim.namespace, claim.name, claim.uid
        ));
        for d in &claim.devices {
            lines.push(format!(
                "  request {:<12} driver {} pool {} device {}",
                d.request, d.driver, d.pool, d.device
            ));
        }
        for r in &claim.reserved_for {
            lines.push(format!(
                "  reserved for {} {} ({})",
                r.resource, r.name, r.uid
            ));
        }
    }
    lines
}

/// The ResourceClaim (or template) a pod-level claim names.
fn claim_object(claim: &corral_topology::PodResourceClaim) -> String {
    match (
        &claim.resource_claim_name,
        &claim.resource_claim_template_name,
    ) {
        (Some(name), _) => name.clone(),
        (None, Some(template)) => format!("template:{template}"),
        (None, None) => "-".to_owned(),
    }
}

/// `driver/pool/device` of every device the container's claims were allocated, from the
/// claim manifests of the pod's namespace.
fn container_devices(
    pod: &Pod,
    container: &corral_topology::Container,
    claims: &[ClaimManifest],
) -> Vec<String> {
    let mut devices = Vec::new();
    for used in &container.claims {
        let Some(object) = pod
            .resource_claims
            .iter()
            .find(|c| c.name == used.name)
            .and_then(|c| c.resource_claim_name.as_deref())
        else {
            continue;
        };
        let Some(claim) = claims
            .iter()
            .find(|c| c.namespace == pod.namespace && c.name == object)
        else {
            continue;
        };
        devices.extend(
            claim
                .devices
                .iter()
                .filter(|d| used.request.as_ref().is_none_or(|r| *r == d.request))
                .map(|d| format!("{}/{}/{}", d.driver, d.pool, d.device)),
        );
    }
    devices
}

/// The QoS class as Kubernetes writes it (`status.qosClass`).
fn qos_name(qos: QosClass) -> &'static str {
    match qos {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    }
}

fn kind_name(kind: ContainerKind) -> &'static str {
    match kind {
        ContainerKind::Init => "init",
        ContainerKind::Sidecar => "sidecar",
        ContainerKind::App => "app",
    }
}

fn list_text(list: &ResourceList) -> String {
    let mut parts = Vec::new();
    if let Some(cpu) = list.cpu_millis {
        parts.push(format!("cpu={cpu}m"));
    }
    if let Some(memory) = list.memory_bytes {
        parts.push(format!("memory={memory}"));
    }
    for (name, value) in &list.extended {
        parts.push(format!("{name}={value}"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

fn pod_json(pod: &Pod) -> serde_json::Value {
    serde_json::json!({
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
        "qosClass": qos_name(pod.qos_class()),
        "containers": pod.all_containers().map(|(kind, c)| serde_json::json!({
            "name": c.name,
            "kind": kind_name(kind),
            "requests": list_json(&c.resources.requests),
            "limits": list_json(&c.resources.limits),
            "claims": c.claims.iter().map(|cl| serde_json::json!({"name": cl.name, "request": cl.request})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn list_json(list: &ResourceList) -> serde_json::Value {
    serde_json::json!({"cpuMillis": list.cpu_millis, "memoryBytes": list.memory_bytes, "extended": list.extended})
}

fn claim_json(claim: &ClaimManifest) -> serde_json::Value {
    serde_json::json!({
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "devices": claim.devices.iter().map(|d| serde_json::json!({
            "request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device, "shareId": d.share_id,
        })).collect::<Vec<_>>(),
        "reservedFor": claim.reserved_for.iter().map(|r| serde_json::json!({
            "resource": r.resource, "name": r.name, "uid": r.uid,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_uid_is_the_documented_uuid_v5() {
        // Python: uuid.uuid5(uuid.NAMESPACE_URL, "urn:corral:pod:default/web")
        assert_eq!(
            stable_pod_uid("default", "web"),
            "37343419-00bc-5c20-a7dd-98d73126c4a2"
        );
        assert_ne!(
            stable_pod_uid("default", "web"),
            stable_pod_uid("other", "web")
        );
    }

    fn manifests(text: &str) -> Manifests {
        let mut manifests = Manifests::default();
        manifests.add_text("test", text).unwrap();
        manifests
    }

    const NO_UID: &str =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: app}]\n";

    #[test]
    fn a_manifest_without_uid_gets_its_stable_uid() {
        let pods = explained_pods(&manifests(NO_UID)).unwrap();
        assert_eq!(pods[0].uid, "37343419-00bc-5c20-a7dd-98d73126c4a2");
        let with_uid = NO_UID.replace("{name: web}", "{name: web, uid: given-1}");
        assert_eq!(
            explained_pods(&manifests(&with_uid)).unwrap()[0].uid,
            "given-1"
        );
    }

    #[test]
    fn admission_gives_a_fresh_random_v4_uid() {
        let manifest = &manifests(NO_UID).pods[0];
        let first = pod_from_manifest(manifest, &PodLimits::DEFAULT)
            .unwrap()
            .uid;
        let second = pod_from_manifest(manifest, &PodLimits::DEFAULT)
            .unwrap()
            .uid;
        assert_ne!(first, second);
        for uid in [first, second] {
            let parsed = uuid::Uuid::parse_str(&uid).unwrap();
            assert_eq!(parsed.get_version_num(), 4, "{uid}");
            assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{uid}");
            assert_eq!(uid, parsed.hyphenated().to_string());
        }
    }
}

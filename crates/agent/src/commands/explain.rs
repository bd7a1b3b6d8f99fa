//! `corral explain -f FILE…`: what corral reads from Pod and ResourceClaim manifests — the
//! API server's defaulting applied, QoS class, each container's kind, resources and claims.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use corral_topology::{ContainerKind, Pod, ResourceList};

use crate::cli::OutputFormat;
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

pub(crate) fn run(files: &[PathBuf], output: OutputFormat) -> Result<ExitCode> {
    let manifests = read_manifests(files)?;
    let pods: Vec<Pod> = manifests
        .pods
        .iter()
        .map(|pod| pod_from_manifest(pod, &PodLimits::DEFAULT))
        .collect::<Result<_, _>>()?;
    let claims: Vec<ClaimManifest> = manifests
        .claims
        .iter()
        .map(ClaimManifest::from_k8s)
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    match output {
        OutputFormat::Json => {
            let doc = serde_json::json!({
                "pods": pods.iter().map(pod_json).collect::<Vec<_>>(),
                "claims": claims.iter().map(claim_json).collect::<Vec<_>>(),
            });
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputFormat::Table => {
            for pod in &pods {
                outln!(
                    "pod {}/{} uid {} qos {:?}",
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    pod.qos_class()
                );
                for (kind, container) in pod.all_containers() {
                    outln!(
                        "  {:<8} {:<20} requests {}  limits {}{}",
                        kind_name(kind),
                        container.name,
                        list_text(&container.resources.requests),
                        list_text(&container.resources.limits),
                        if container.claims.is_empty() {
                            String::new()
                        } else {
                            let names: Vec<String> = container
                                .claims
                                .iter()
                                .map(|c| match &c.request {
                                    Some(r) => format!("{}/{r}", c.name),
                                    None => c.name.clone(),
                                })
                                .collect();
                            format!("  claims {}", names.join(","))
                        }
                    );
                }
            }
            for claim in &claims {
                outln!("claim {}/{} uid {}", claim.namespace, claim.name, claim.uid);
                for d in &claim.devices {
                    outln!(
                        "  request {:<12} driver {} pool {} device {}",
                        d.request,
                        d.driver,
                        d.pool,
                        d.device
                    );
                }
                for r in &claim.reserved_for {
                    outln!("  reserved for {} {} ({})", r.resource, r.name, r.uid);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
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
        "qos": format!("{:?}", pod.qos_class()),
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
    serde_json::json!({"cpu_millis": list.cpu_millis, "memory_bytes": list.memory_bytes, "extended": list.extended})
}

fn claim_json(claim: &ClaimManifest) -> serde_json::Value {
    serde_json::json!({
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "devices": claim.devices.iter().map(|d| serde_json::json!({
            "request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device, "share_id": d.share_id,
        })).collect::<Vec<_>>(),
        "reserved_for": claim.reserved_for.iter().map(|r| serde_json::json!({
            "resource": r.resource, "name": r.name, "uid": r.uid,
        })).collect::<Vec<_>>(),
    })
}

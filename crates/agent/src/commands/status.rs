//! `corral status`: what every admitted pod holds and, in the table or with `--numa`, what
//! each NUMA node has and has free.

use std::process::ExitCode;

use anyhow::Result;
use corral_proto::corral::v1 as api;

use super::client::{ClientError, answer, request, with_client};
use super::numa_nodes::{numa_nodes_json, numa_table};
use crate::cli::{AgentTarget, OutputFormat};
use crate::commands::print_document;
use crate::output::outln;

/// What `status` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusView {
    /// The pods (and, in a table, the NUMA nodes after them).
    Pods,
    /// Only the NUMA nodes (`--numa`).
    NumaNodes,
}

/// Print the admitted pods (`-o json|yaml`: their array, as before NUMA nodes were shown;
/// a table: the pods, then the NUMA nodes) or, with [`StatusView::NumaNodes`], only the
/// NUMA nodes in any format.
pub(crate) fn status(
    target: &AgentTarget,
    output: OutputFormat,
    view: StatusView,
) -> Result<ExitCode> {
    let document = matches!(output, OutputFormat::Json | OutputFormat::Yaml);
    let want_pods = view == StatusView::Pods;
    let want_numa = view == StatusView::NumaNodes || !document;
    let (pods, numa) = with_client(target, async |mut client, socket| {
        let timeout = target.request_timeout;
        let mut pods = Vec::new();
        if want_pods {
            let call = client.list_pods(request(api::ListPodsRequest {}, timeout));
            pods = answer(socket, call, timeout).await?.pods;
        }
        let mut numa = None;
        if want_numa {
            let call = client.list_numa_nodes(request(api::ListNumaNodesRequest {}, timeout));
            match answer(socket, call, timeout).await {
                Ok(answer) => numa = Some(answer.numa_nodes),
                // An agent older than ListNumaNodes: the table shows its pods alone.
                Err(ClientError::Answered {
                    code: tonic::Code::Unimplemented,
                    ..
                }) if want_pods => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok((pods, numa))
    })?;
    let yaml = output == OutputFormat::Yaml;
    match (output, view) {
        (OutputFormat::Json | OutputFormat::Yaml, StatusView::Pods) => {
            let doc: Vec<_> = pods.iter().map(allocation_json).collect();
            print_document(&serde_json::Value::from(doc), yaml)?;
        }
        (OutputFormat::Json | OutputFormat::Yaml, StatusView::NumaNodes) => {
            print_document(&numa_nodes_json(&numa.unwrap_or_default()), yaml)?;
        }
        (OutputFormat::Table | OutputFormat::Wide, StatusView::NumaNodes) => {
            for line in numa_table(&numa.unwrap_or_default()) {
                outln!("{line}");
            }
        }
        (OutputFormat::Table | OutputFormat::Wide, StatusView::Pods) => {
            print_table(&pods, output == OutputFormat::Wide)?;
            if let Some(numa) = numa {
                outln!();
                for line in numa_table(&numa) {
                    outln!("{line}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The container's NUMA nodes; `~` after them when the pod's decision was approximate.
fn numa(pod: &api::PodAllocation, container: &api::ContainerAllocation) -> String {
    let mark = if pod.approximate { "~" } else { "" };
    if container.numa_affinity.is_empty() {
        return format!("-{mark}");
    }
    let ids: Vec<String> = container.numa_affinity.iter().map(i64::to_string).collect();
    format!("{}{mark}", ids.join(","))
}

/// What `~` in the NUMA column means.
const APPROXIMATE_NOTE: &str = "~ approximate: the decision ran out of its search budget; its NUMA nodes or CPUs are the best found, not proven to be upstream's";

/// One line per container; `wide` adds its container id, device nodes and environment.
pub(super) fn print_table(pods: &[api::PodAllocation], wide: bool) -> Result<()> {
    let mut header = format!(
        "{:<36}  {:<28}  {:<16}  {:<7}  {:<16}  {:<4}  {:<5}  {:<24}  {:<24}",
        "POD UID", "POD", "CONTAINER", "KIND", "CPUSET", "EXCL", "NUMA", "MEMORY", "DEVICES"
    );
    if wide {
        header.push_str(&format!(
            "  {:<16}  {:<24}  ENV",
            "CONTAINER ID", "DEVICE NODES"
        ));
    }
    outln!("{}", header.trim_end());
    for pod in pods {
        for c in &pod.containers {
            let mut held: Vec<String> = c
                .devices
                .iter()
                .map(|d| format!("{}={}", d.resource, d.device_ids.join(",")))
                .collect();
            held.extend(
                c.run_options
                    .iter()
                    .flat_map(|o| o.cdi_devices.iter().map(|d| format!("cdi:{d}"))),
            );
            let memory: Vec<String> = c.memory.iter().map(memory_cell).collect();
            let mut line = format!(
                "{:<36}  {:<28}  {:<16}  {:<7}  {:<16}  {:<4}  {:<5}  {:<24}  {:<24}",
                pod.uid,
                format!("{}/{}", pod.namespace, pod.name),
                c.name,
                c.kind,
                c.cpuset,
                if c.exclusive_cpus { "yes" } else { "no" },
                numa(pod, c),
                dash_if_empty(memory.join(" ")),
                dash_if_empty(held.join(" "))
            );
            if wide {
                let nodes: Vec<&str> = c
                    .run_options
                    .iter()
                    .flat_map(|o| o.devices.iter().map(|d| d.host_path.as_str()))
                    .collect();
                let envs: std::collections::BTreeMap<&str, &str> = c
                    .run_options
                    .iter()
                    .flat_map(|o| o.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .collect();
                let envs: Vec<String> = envs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                line.push_str(&format!(
                    "  {:<16}  {:<24}  {}",
                    dash_if_empty(c.container_id.clone()),
                    dash_if_empty(nodes.join(",")),
                    dash_if_empty(envs.join(","))
                ));
            }
            outln!("{}", line.trim_end());
        }
    }
    if pods.iter().any(|p| p.approximate) {
        outln!("{APPROXIMATE_NOTE}");
    }
    Ok(())
}

/// `memory=1Gi@0`, `hugepages-2Mi=512Mi@0,1`: the type, the size in the largest binary unit
/// that divides it, the NUMA nodes.
fn memory_cell(block: &api::MemoryBlock) -> String {
    let size = corral_topology::QuantitySum::of(
        i64::try_from(block.size).unwrap_or(i64::MAX),
        corral_topology::QuantityFormat::BinarySi,
    );
    let nodes: Vec<String> = block.numa_affinity.iter().map(i64::to_string).collect();
    format!("{}={size}@{}", block.r#type, nodes.join(","))
}

fn dash_if_empty(text: String) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}

/// A pod's holdings as JSON; `approximate: true` only on a decision that ran out of its
/// search budget (omitted otherwise, as the kubelet's `omitempty`).
pub(super) fn allocation_json(pod: &api::PodAllocation) -> serde_json::Value {
    let mut json = allocation_json_fields(pod);
    if pod.approximate {
        json["approximate"] = true.into();
    }
    json
}

fn allocation_json_fields(pod: &api::PodAllocation) -> serde_json::Value {
    serde_json::json!({
        "uid": pod.uid,
        "namespace": pod.namespace,
        "name": pod.name,
        "containers": pod.containers.iter().map(|c| serde_json::json!({
            "name": c.name,
            "kind": c.kind,
            "cpuset": c.cpuset,
            "exclusiveCpus": c.exclusive_cpus,
            "cpuQuotaDisabled": c.cpu_quota_disabled,
            "numaAffinity": c.numa_affinity,
            "devices": c.devices.iter().map(|d| (d.resource.clone(), d.device_ids.clone())).collect::<std::collections::BTreeMap<_, _>>(),
            "cdiDevices": c.run_options.as_ref().map(|o| o.cdi_devices.clone()).unwrap_or_default(),
            "envs": c.run_options.as_ref().map(|o| o.envs.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<std::collections::BTreeMap<_, _>>()).unwrap_or_default(),
            "deviceNodes": c.run_options.as_ref().map(|o| o.devices.iter().map(|d| d.host_path.clone()).collect::<Vec<_>>()).unwrap_or_default(),
            "containerId": c.container_id,
            "memory": c.memory.iter().map(|m| serde_json::json!({
                "type": m.r#type,
                "size": m.size,
                "numaAffinity": m.numa_affinity,
            })).collect::<Vec<_>>(),
            // The kubelet's JSON names (`v1.ResourceStatus`, `v1.ResourceHealth`).
            "allocatedResourcesStatus": c.allocated_resources_status.iter().map(|s| serde_json::json!({
                "name": s.name,
                "resources": s.resources.iter().map(|r| {
                    let mut health = serde_json::json!({
                        "resourceID": r.resource_id,
                        "health": r.health,
                    });
                    // `message` is omitted when unset, as the kubelet's `omitempty`.
                    if !r.message.is_empty() {
                        health["message"] = r.message.clone().into();
                    }
                    health
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

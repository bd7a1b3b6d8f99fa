//! `corral config check`: validate the configuration file and flags, print the result.
//! With `--host-root`, the managers are also built on that machine's topology, as `run`
//! builds them, so what only the machine can refuse (a reserved CPU it lacks, a memory
//! reservation above a node's memory) is refused here too, with `run`'s message.

use std::process::ExitCode;

use anyhow::{Context, Result};
use corral_topology::topologymanager::TopologyManager;

use crate::cli::ConfigArgs;
use crate::config::{self, AgentConfig, GoDuration};
use crate::output::outln;

/// Build the managers `run` builds from the machine under `config.host_root` (nothing is
/// started, no file written); the machine's size when they accept the configuration.
fn check_machine(config: &AgentConfig) -> Result<String> {
    let host_root = &config.host_root;
    let topology = corral_topology::sysfs::discover(host_root)
        .with_context(|| format!("discovering the CPU topology under {}", host_root.display()))?;
    TopologyManager::new(&config.topology, &topology.numa_nodes_for_manager())
        .context("building the topology manager")?;
    corral_cpumgr::CpuManager::new(&config.cpu_manager, &topology)
        .context("building the CPU manager")?;
    if config.memory_manager.policy == corral_memmgr::MemoryPolicy::Static {
        let memory = corral_topology::sysfs::discover_memory(host_root).with_context(|| {
            format!(
                "discovering the NUMA nodes' memory under {}",
                host_root.display()
            )
        })?;
        let memory_config = config
            .memory_manager
            .manager_config(&memory)
            .context("computing the node allocatable reservation of memory")?;
        corral_memmgr::MemoryManager::new(&memory_config, &memory)
            .context("building the memory manager")?;
    }
    Ok(format!(
        "{} CPUs, {} NUMA nodes under {}",
        topology.num_cpus(),
        topology.numa_nodes().len(),
        host_root.display()
    ))
}

pub(crate) fn run(args: &ConfigArgs) -> Result<ExitCode> {
    match config::load(args) {
        Ok((config, unknown)) => {
            for key in unknown {
                eprintln!("corral: warning: {key}");
            }
            let machine = match args.host_root {
                None => None,
                Some(_) => match check_machine(&config) {
                    Ok(machine) => Some(machine),
                    Err(err) => {
                        eprintln!(
                            "corral: the configuration does not fit the machine: {}",
                            crate::error_text::anyhow_chain(&err)
                        );
                        return Ok(ExitCode::from(2));
                    }
                },
            };
            outln!("configuration is valid");
            if let Some(machine) = machine {
                outln!("  machine (--host-root):      {machine}, the managers accept it");
            }
            let cpu = &config.cpu_manager;
            outln!("  cpuManagerPolicy:           {}", cpu.policy);
            outln!(
                "  cpuManagerPolicyOptions:    {}",
                if cpu.policy_options.is_empty() {
                    "-".to_owned()
                } else {
                    cpu.policy_options
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                }
            );
            outln!(
                "  cpuManagerReconcilePeriod:  {}",
                GoDuration(cpu.reconcile_period)
            );
            outln!(
                "  reservedSystemCPUs:         {}",
                if cpu.reserved_system_cpus.is_empty() {
                    "-".to_owned()
                } else {
                    cpu.reserved_system_cpus.to_string()
                }
            );
            outln!(
                "  reserved CPU (kube+system): {}",
                match cpu.reserved_cpu_millis {
                    Some(millis) => format!("{millis}m"),
                    None if !cpu.reserved_system_cpus.is_empty() =>
                        "- (the reservedSystemCPUs set)".to_owned(),
                    None => "-".to_owned(),
                }
            );
            outln!("  topologyManagerPolicy:      {}", config.topology.policy);
            outln!("  topologyManagerScope:       {}", config.topology.scope);
            let memory = &config.memory_manager;
            outln!("  memoryManagerPolicy:        {}", memory.policy.name());
            let reserved: Vec<String> = memory
                .reserved_memory
                .iter()
                .map(|r| {
                    let limits: Vec<String> =
                        r.limits.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("{}: {}", r.numa_node, limits.join(","))
                })
                .collect();
            outln!(
                "  reservedMemory:             {}",
                if reserved.is_empty() {
                    "-".to_owned()
                } else {
                    reserved.join("; ")
                }
            );
            match &config.nrt {
                Some(nrt) => {
                    outln!("  nodeName:                   {}", nrt.node_name);
                    outln!(
                        "  kubeconfig:                 {}",
                        match &nrt.credentials {
                            config::Credentials::Kubeconfig(path) => path.display().to_string(),
                            config::Credentials::InCluster =>
                                "- (the pod's service account)".to_owned(),
                        }
                    );
                    outln!(
                        "  nodeResourceTopologyResyncPeriod: {}",
                        GoDuration(nrt.resync_period)
                    );
                }
                None => {
                    outln!("  nodeName:                   - (no NodeResourceTopology is published)")
                }
            }
            match &config.nri {
                config::NriMode::Plugin(nri) => {
                    outln!("  nri:                        true");
                    outln!(
                        "  nriSocket:                  {}",
                        nri.plugin.socket.display()
                    );
                    outln!("  nriPluginIndex:             {}", nri.plugin.index);
                    outln!(
                        "  kubeletPodResourcesSocket:  {}",
                        nri.kubelet_pod_resources.display()
                    );
                    outln!(
                        "  nriGuardPinnedCpusets:      {}",
                        nri.pinned_cpusets == config::PinnedCpusets::Guarded
                    );
                    outln!(
                        "  nriDisconnectedGracePeriod: {}",
                        GoDuration(nri.disconnected_grace)
                    );
                }
                config::NriMode::Off => {
                    outln!(
                        "  nri:                        false (pods come through the admission API)"
                    )
                }
            }
            let gates = &config.feature_gates;
            for warning in gates.warnings() {
                eprintln!("corral: warning: {warning}");
            }
            outln!("  featureGates (in force; v1.37 maturity and default):");
            for feature in corral_topology::FEATURES {
                outln!(
                    "    {:<40}{:<6} {:<5} since {}{}{}",
                    feature.name(),
                    gates.enabled(feature),
                    feature.maturity(),
                    feature.since(),
                    if feature.locked() { ", locked" } else { "" },
                    if gates.is_default(feature) {
                        ""
                    } else {
                        " (set)"
                    },
                );
            }
            if !gates.ignored().is_empty() {
                outln!(
                    "  featureGates corral does not read: {}",
                    gates.ignored().join(", ")
                );
            }
            outln!(
                "  containerRuntimeEndpoint:   {}",
                config
                    .container_runtime_endpoint
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "- (no CPU reconcile)".into())
            );
            outln!(
                "  metricsAddress:             {}",
                config
                    .metrics_address
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "- (off)".into())
            );
            outln!(
                "  devicePluginGracePeriod:    {}",
                GoDuration(config.device_plugin_grace_period)
            );
            outln!(
                "  pluginWaitTimeout:          {}",
                GoDuration(config.plugin_wait_timeout)
            );
            outln!(
                "  hostRoot:                   {}",
                config.host_root.display()
            );
            let layout = &config.layout;
            outln!("  root:                       {}", layout.root().display());
            for (what, path) in [
                ("state files:", layout.state_dir().to_path_buf()),
                ("device plugins:", layout.device_plugins_dir()),
                ("plugin registry:", layout.plugins_registry_dir()),
                ("pod-resources socket:", layout.pod_resources_socket()),
                ("admission socket:", layout.agent_socket()),
            ] {
                outln!("    {what:<26}{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            eprint!("corral: {errors}");
            Ok(ExitCode::from(2))
        }
    }
}

//! `corral config check`: validate the configuration file and flags, print the result.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::ConfigArgs;
use crate::config;

pub(crate) fn run(args: &ConfigArgs) -> Result<ExitCode> {
    match config::load(args) {
        Ok((config, unknown)) => {
            for key in unknown {
                eprintln!("corral: warning: config key {key:?} is not read by corral");
            }
            println!("configuration is valid");
            println!(
                "  cpuManagerPolicy:           {}",
                config.cpu_manager_policy
            );
            println!(
                "  cpuManagerPolicyOptions:    {:?}",
                config.cpu_manager_policy_options
            );
            println!(
                "  cpuManagerReconcilePeriod:  {:?}",
                config.cpu_manager_reconcile_period
            );
            println!(
                "  reservedSystemCPUs:         {}",
                config
                    .reserved_system_cpus
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into())
            );
            println!(
                "  reserved CPU (kube+system): {}m",
                config.reserved_cpu_millis
            );
            println!("  topologyManagerPolicy:      {}", config.topology.policy);
            println!("  topologyManagerScope:       {}", config.topology.scope);
            println!(
                "  containerRuntimeEndpoint:   {}",
                config
                    .container_runtime_endpoint
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "- (no CPU reconcile)".into())
            );
            println!(
                "  metricsAddress:             {}",
                config
                    .metrics_address
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "- (off)".into())
            );
            println!(
                "  devicePluginGracePeriod:    {:?}",
                config.device_plugin_grace_period
            );
            println!(
                "  pluginWaitTimeout:          {:?}",
                config.plugin_wait_timeout
            );
            println!(
                "  hostRoot:                   {}",
                config.host_root.display()
            );
            let layout = &config.layout;
            println!("  root:                       {}", layout.root().display());
            println!(
                "    state files:              {}",
                layout.state_dir().display()
            );
            println!(
                "    device plugins:           {}",
                layout.device_plugins_dir().display()
            );
            println!(
                "    plugin registry:          {}",
                layout.plugins_registry_dir().display()
            );
            println!(
                "    pod-resources socket:     {}",
                layout.pod_resources_socket().display()
            );
            println!(
                "    admission socket:         {}",
                layout.agent_socket().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            eprint!("corral: {errors}");
            Ok(ExitCode::from(2))
        }
    }
}

//! `corral config check`: validate the configuration file and flags, print the result.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::ConfigArgs;
use crate::config;
use crate::output::outln;

pub(crate) fn run(args: &ConfigArgs) -> Result<ExitCode> {
    match config::load(args) {
        Ok((config, unknown)) => {
            for key in unknown {
                eprintln!("corral: warning: config key {key:?} is not read by corral");
            }
            outln!("configuration is valid");
            outln!(
                "  cpuManagerPolicy:           {}",
                config.cpu_manager_policy
            );
            outln!(
                "  cpuManagerPolicyOptions:    {:?}",
                config.cpu_manager_policy_options
            );
            outln!(
                "  cpuManagerReconcilePeriod:  {:?}",
                config.cpu_manager_reconcile_period
            );
            outln!(
                "  reservedSystemCPUs:         {}",
                config
                    .reserved_system_cpus
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into())
            );
            outln!(
                "  reserved CPU (kube+system): {}m",
                config.reserved_cpu_millis
            );
            outln!("  topologyManagerPolicy:      {}", config.topology.policy);
            outln!("  topologyManagerScope:       {}", config.topology.scope);
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
                "  devicePluginGracePeriod:    {:?}",
                config.device_plugin_grace_period
            );
            outln!(
                "  pluginWaitTimeout:          {:?}",
                config.plugin_wait_timeout
            );
            outln!(
                "  hostRoot:                   {}",
                config.host_root.display()
            );
            let layout = &config.layout;
            outln!("  root:                       {}", layout.root().display());
            outln!(
                "    state files:              {}",
                layout.state_dir().display()
            );
            outln!(
                "    device plugins:           {}",
                layout.device_plugins_dir().display()
            );
            outln!(
                "    plugin registry:          {}",
                layout.plugins_registry_dir().display()
            );
            outln!(
                "    pod-resources socket:     {}",
                layout.pod_resources_socket().display()
            );
            outln!(
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

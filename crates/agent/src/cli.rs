//! The command line: every command with its flags, help and examples.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// corral: the kubelet's node resource managers (topology, CPU, devices, DRA) as a node agent.
#[derive(Debug, Parser)]
#[command(name = "corral", version, propagate_version = true)]
pub(crate) struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub(crate) log_format: LogFormat,
    /// More log output (-v: debug, -vv: trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Output format of query commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// A table for people.
    Table,
    /// JSON for programs.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the agent: discover the machine, restore the managers, serve the admission and
    /// podresources APIs until SIGTERM/SIGINT.
    #[command(
        after_help = "Examples:\n  corral run --cpu-manager-policy static --reserved-system-cpus 0 --demo-devices 4\n  corral run -c /etc/corral/config.yaml --kubelet-layout\n  corral run --root /tmp/corral --host-root /host --topology-manager-policy single-numa-node"
    )]
    Run {
        #[command(flatten)]
        config: Box<ConfigArgs>,
        /// Start the sample device plugin in-process with N devices of `example.com/gpu`,
        /// spread over the NUMA nodes, so device allocation and alignment can be tried.
        #[arg(long, value_name = "N", default_value_t = 0)]
        demo_devices: usize,
    },
    /// Admit the pods of manifest files through a running agent and print what each
    /// container got (exit 1 when a pod is rejected).
    #[command(
        after_help = "Examples:\n  corral admit -f examples/pods/guaranteed.yaml\n  corral admit -f pod.yaml -f claims.yaml --root /tmp/corral -o json"
    )]
    Admit {
        /// Pod and ResourceClaim manifests (YAML or JSON, several documents each); `-` for stdin.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
        #[command(flatten)]
        target: AgentTarget,
    },
    /// Release everything a pod holds (its CPUs, affinities, claims).
    #[command(after_help = "Example:\n  corral release 6f1c0d7e-5a2b-4c3d-9e8f-0a1b2c3d4e5f")]
    Release {
        /// The pod's uid.
        pod_uid: String,
        #[command(flatten)]
        target: AgentTarget,
    },
    /// Show what every container of every admitted pod holds.
    #[command(
        after_help = "Examples:\n  corral status\n  corral status -o json --root /tmp/corral"
    )]
    Status {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
        #[command(flatten)]
        target: AgentTarget,
    },
    /// Show the machine's CPU topology as the managers see it.
    #[command(
        after_help = "Examples:\n  corral topology\n  corral topology -o json\n  corral topology --host-root /host   # a host's /sys mounted elsewhere"
    )]
    Topology {
        /// Root under which /sys (and /proc) are read.
        #[arg(long, default_value = "/")]
        host_root: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Show Pod and ResourceClaim manifests as corral reads them (defaulting, QoS, claims).
    #[command(
        after_help = "Examples:\n  corral explain -f examples/pods/guaranteed.yaml\n  corral explain -f pod.yaml -f claims.yaml -o json"
    )]
    Explain {
        /// Manifest files (YAML or JSON, several documents each); `-` for stdin.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Read kubelet and corral checkpoint files.
    #[command(subcommand)]
    Checkpoint(CheckpointCommand),
    /// Check a configuration file (and flags) without starting anything.
    #[command(
        after_help = "Examples:\n  corral config check -c /etc/corral/config.yaml\n  corral config check -c kubelet-config.yaml --topology-manager-policy restricted"
    )]
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointCommand {
    /// Detect a checkpoint file's format, verify its checksum and print its contents.
    #[command(
        after_help = "Examples:\n  corral checkpoint inspect /var/lib/kubelet/cpu_manager_state\n  corral checkpoint inspect .corral/device-plugins/kubelet_internal_checkpoint -o json"
    )]
    Inspect {
        /// The file (cpu_manager_state, memory_manager_state, dra_manager_state,
        /// kubelet_internal_checkpoint).
        file: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Verify a checkpoint file: exit 0 when a kubelet would accept it, 1 otherwise.
    #[command(
        after_help = "Example:\n  corral checkpoint verify /var/lib/kubelet/dra_manager_state && echo ok"
    )]
    Verify {
        /// The file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate the configuration and print it as the agent would run with it.
    Check(Box<ConfigArgs>),
}

/// Which agent a client command talks to: the agent socket under the root.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct AgentTarget {
    /// Config file whose `root`/`kubeletLayout` locate the agent.
    #[arg(short, long)]
    pub(crate) config: Option<PathBuf>,
    /// Root directory of the agent (its socket is ROOT/corral/agent.sock).
    #[arg(long)]
    pub(crate) root: Option<PathBuf>,
    /// The agent runs with the kubelet's standard paths.
    #[arg(long)]
    pub(crate) kubelet_layout: bool,
    /// How long to wait for each answer of the agent (a duration like 30s or 2m, as kubectl's
    /// flag); above the longest an admission may take (a device plugin's registration wait
    /// and Allocate, a DRA driver's prepare), never forever.
    #[arg(long, default_value = "2m", value_parser = crate::config::parse_go_duration)]
    pub(crate) request_timeout: std::time::Duration,
}

/// The configuration: a file plus flags that override its keys.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ConfigArgs {
    /// YAML or JSON file with KubeletConfiguration keys (cpuManagerPolicy, …) and corral's.
    #[arg(short, long)]
    pub(crate) config: Option<PathBuf>,
    /// Root directory for sockets and state files (kubelet's relative layout beneath it).
    #[arg(long)]
    pub(crate) root: Option<PathBuf>,
    /// Use the kubelet's standard paths (/var/lib/kubelet/...).
    #[arg(long)]
    pub(crate) kubelet_layout: bool,
    /// Root under which /sys and /proc are read (a DaemonSet may mount the host's /sys elsewhere).
    #[arg(long)]
    pub(crate) host_root: Option<PathBuf>,
    /// `cpuManagerPolicy`: none or static.
    #[arg(long)]
    pub(crate) cpu_manager_policy: Option<String>,
    /// `cpuManagerPolicyOptions`, as KEY=VALUE (repeatable).
    #[arg(long, value_parser = parse_key_value)]
    pub(crate) cpu_manager_policy_option: Vec<(String, String)>,
    /// `reservedSystemCPUs`, a cpuset list like 0-1.
    #[arg(long)]
    pub(crate) reserved_system_cpus: Option<String>,
    /// `topologyManagerPolicy`: none, best-effort, restricted or single-numa-node.
    #[arg(long)]
    pub(crate) topology_manager_policy: Option<String>,
    /// `topologyManagerScope`: container or pod.
    #[arg(long)]
    pub(crate) topology_manager_scope: Option<String>,
    /// `topologyManagerPolicyOptions`, as KEY=VALUE (repeatable).
    #[arg(long, value_parser = parse_key_value)]
    pub(crate) topology_manager_policy_option: Vec<(String, String)>,
    /// `containerRuntimeEndpoint`: the CRI socket cpusets are pushed to.
    #[arg(long)]
    pub(crate) container_runtime_endpoint: Option<String>,
    /// Serve Prometheus metrics on this loopback address (e.g. 127.0.0.1:9464).
    #[arg(long)]
    pub(crate) metrics_addr: Option<String>,
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}

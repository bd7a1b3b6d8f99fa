//! The command line: every command with its flags, help and examples.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// corral: the kubelet's node resource managers (topology, CPU, devices, DRA) as a node agent.
#[derive(Debug, Parser)]
#[command(name = "corral", version, propagate_version = true)]
pub(crate) struct Cli {
    /// Log format on stderr: text, or json as the Kubernetes components write it
    /// (`--logging-format`, the kubelet's spelling, is the same flag).
    #[arg(
        long,
        visible_alias = "logging-format",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    pub(crate) log_format: LogFormat,
    /// More log output (-v: debug, -vv: trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// klog verbosity, as the kubelet's `-v=N` / `--v=N`: 0-1 info, 2-3 debug, 4 and more
    /// trace (the more verbose of this and -v wins); RUST_LOG overrides.
    #[arg(long = "v", value_name = "N", global = true)]
    pub(crate) klog_verbosity: Option<u32>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Cli {
    /// Parse `args` (the program name first), accepting the kubelet's `-v=N` beside
    /// corral's `-v`/`-vv`: `-v=N` is read as `--v=N` (before any `--`).
    pub(crate) fn parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString>,
    {
        let mut after_separator = false;
        let args = args.into_iter().map(|arg| {
            let arg: std::ffi::OsString = arg.into();
            if after_separator {
                return arg;
            }
            if arg == "--" {
                after_separator = true;
                return arg;
            }
            match arg.to_str().and_then(|text| text.strip_prefix("-v=")) {
                Some(level) => format!("--v={level}").into(),
                None => arg,
            }
        });
        Self::try_parse_from(args.collect::<Vec<_>>())
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, the Kubernetes components' JSON shape (`ts`, `caller`,
    /// `msg`, `v`, then the key/values).
    Json,
}

/// Output format of query commands (kubectl's `-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// A table for people.
    Table,
    /// The table with more columns.
    Wide,
    /// JSON for programs (camelCase keys, as Kubernetes).
    Json,
    /// The JSON document as YAML.
    Yaml,
}

/// Output format of commands that show one document (no wider table to give).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DocumentFormat {
    /// Text for people.
    Table,
    /// JSON for programs.
    Json,
    /// The JSON document as YAML.
    Yaml,
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
        after_help = "Examples:\n  corral admit -f examples/pods/guaranteed.yaml\n  corral admit -f pod.yaml -f claims.yaml --root /tmp/corral -o json\n  corral admit -f pod.yaml -o wide\n  corral admit --dry-run -f pod.yaml -o json   # would it fit, and if not, why"
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
        /// Answer what the admission would (the allocation, or the rejection and why)
        /// without changing anything: no state, file, NodeResourceTopology or metric
        /// changes; device plugins are not asked to allocate, claims are not prepared.
        #[arg(long)]
        dry_run: bool,
    },
    /// Release everything a pod holds (its CPUs, affinities, claims).
    #[command(
        after_help = "Examples:\n  corral release 6f1c0d7e-5a2b-4c3d-9e8f-0a1b2c3d4e5f\n  corral release default/web-0"
    )]
    Release {
        /// The pod: its uid, or NAMESPACE/NAME of an admitted pod.
        #[arg(value_name = "UID|NAMESPACE/NAME")]
        pod: String,
        #[command(flatten)]
        target: AgentTarget,
    },
    /// Show what every container of every admitted pod holds.
    #[command(
        after_help = "Examples:\n  corral status\n  corral status -o wide\n  corral status --numa -o json   # per NUMA node: CPUs, memory, devices free\n  corral status -o yaml --root /tmp/corral"
    )]
    Status {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
        #[command(flatten)]
        target: AgentTarget,
        /// Only what each NUMA node has and has free (CPUs, memory and huge pages under the
        /// static memory policy, devices), in any output format; the table shows it after
        /// the pods anyway.
        #[arg(long)]
        numa: bool,
    },
    /// Show the machine's CPU topology as the managers see it.
    #[command(
        after_help = "Examples:\n  corral topology\n  corral topology -o json\n  corral topology -o wide   # one line per CPU too\n  corral topology --host-root /host   # a host's /sys mounted elsewhere"
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
        after_help = "Examples:\n  corral explain -f examples/pods/guaranteed.yaml\n  corral explain -f pod.yaml -f claims.yaml -o yaml"
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
    /// Print the shell completion script for SHELL.
    #[command(
        after_help = "Examples:\n  corral completions bash > /etc/bash_completion.d/corral\n  corral completions zsh > \"${fpath[1]}/_corral\"\n  corral completions fish > ~/.config/fish/completions/corral.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff, section 1) of corral, or of one of its commands.
    #[command(
        after_help = "Examples:\n  corral man | man -l -\n  corral man run | man -l -\n  corral man config check > /usr/local/share/man/man1/corral-config-check.1"
    )]
    Man {
        /// The command whose page to print (its words: run, config check); none: corral's.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointCommand {
    /// Detect a checkpoint file's format, verify its checksum and print its contents.
    #[command(
        after_help = "Examples:\n  corral checkpoint inspect /var/lib/kubelet/cpu_manager_state\n  corral checkpoint inspect .corral/device-plugins/kubelet_internal_checkpoint -o yaml"
    )]
    Inspect {
        /// The file (cpu_manager_state, memory_manager_state, dra_manager_state,
        /// kubelet_internal_checkpoint).
        file: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = DocumentFormat::Table)]
        output: DocumentFormat,
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
    /// Root directory of the agent (its socket is ROOT/corral/agent.sock; `--root-dir`, the
    /// kubelet's name, is the same flag).
    #[arg(long, visible_alias = "root-dir", value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// The agent runs with the kubelet's standard paths.
    #[arg(long)]
    pub(crate) kubelet_layout: bool,
    /// How long to wait for each answer of the agent (a duration like 30s or 2m, as kubectl's
    /// flag); above the longest an admission may take (a device plugin's registration wait
    /// and Allocate, a DRA driver's prepare), never forever.
    #[arg(long, default_value = "2m", value_parser = crate::duration::parse_go_duration)]
    pub(crate) request_timeout: std::time::Duration,
}

/// The configuration: a file plus flags that override its keys.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ConfigArgs {
    /// YAML or JSON file with KubeletConfiguration keys (cpuManagerPolicy, …) and corral's.
    #[arg(short, long)]
    pub(crate) config: Option<PathBuf>,
    /// Root directory for sockets and state files, the kubelet's relative layout beneath it
    /// (the kubelet's `--root-dir` is the same flag: `--root-dir /var/lib/kubelet` is
    /// `--kubelet-layout`).
    #[arg(long, visible_alias = "root-dir", value_name = "DIR")]
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
    /// `cpuManagerPolicyOptions`, as KEY=VALUE,KEY=VALUE (repeatable; the kubelet's
    /// `--cpu-manager-policy-options` is the same flag).
    #[arg(
        long,
        visible_alias = "cpu-manager-policy-options",
        value_name = "KEY=VALUE,...",
        value_parser = parse_key_values
    )]
    pub(crate) cpu_manager_policy_option: Vec<KeyValues>,
    /// `reservedSystemCPUs`, a cpuset list like 0-1 (the kubelet's `--reserved-cpus` is the
    /// same flag).
    #[arg(long, visible_alias = "reserved-cpus")]
    pub(crate) reserved_system_cpus: Option<String>,
    /// `cpuManagerReconcilePeriod`: how often the CPU manager pushes cpusets to the runtime
    /// (a duration like 10s).
    #[arg(long, value_name = "DURATION")]
    pub(crate) cpu_manager_reconcile_period: Option<String>,
    /// `kubeReserved`, as KEY=VALUE,KEY=VALUE (cpu=500m,memory=1Gi; repeatable, the later
    /// value of a key wins; replaces the file's map).
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = parse_key_values)]
    pub(crate) kube_reserved: Vec<KeyValues>,
    /// `systemReserved`, as KEY=VALUE,KEY=VALUE (as --kube-reserved).
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = parse_key_values)]
    pub(crate) system_reserved: Vec<KeyValues>,
    /// `memoryManagerPolicy`: None or Static.
    #[arg(long, value_name = "POLICY")]
    pub(crate) memory_manager_policy: Option<String>,
    /// `reservedMemory`, as the kubelet's flag: `0:memory=1Gi,hugepages-2Mi=2Mi;1:memory=1Gi`
    /// (nodes separated by `;`; repeatable, each occurrence adds its nodes; replaces the
    /// file's list).
    #[arg(long, value_name = "ID:TYPE=QUANTITY,...;...", value_parser = crate::kubelet_flags::parse_reserved_memory)]
    pub(crate) reserved_memory: Vec<crate::kubelet_flags::ReservedMemoryValues>,
    /// `featureGates`, as Name=true,Other=false (repeatable; merged gate by gate over the
    /// file's, the flag winning, as the kubelet).
    #[arg(long, value_name = "NAME=BOOL,...", value_parser = crate::kubelet_flags::parse_feature_gates)]
    pub(crate) feature_gates: Vec<crate::kubelet_flags::GateValues>,
    /// `topologyManagerPolicy`: none, best-effort, restricted or single-numa-node.
    #[arg(long)]
    pub(crate) topology_manager_policy: Option<String>,
    /// `topologyManagerScope`: container or pod.
    #[arg(long)]
    pub(crate) topology_manager_scope: Option<String>,
    /// `topologyManagerPolicyOptions`, as KEY=VALUE,KEY=VALUE (repeatable; the kubelet's
    /// `--topology-manager-policy-options` is the same flag).
    #[arg(
        long,
        visible_alias = "topology-manager-policy-options",
        value_name = "KEY=VALUE,...",
        value_parser = parse_key_values
    )]
    pub(crate) topology_manager_policy_option: Vec<KeyValues>,
    /// `containerRuntimeEndpoint`: the CRI socket cpusets are pushed to.
    #[arg(long)]
    pub(crate) container_runtime_endpoint: Option<String>,
    /// `metricsAddress`: serve Prometheus metrics, `/healthz` and `/readyz` on this address
    /// and port (e.g. 127.0.0.1:9464; 0.0.0.0:9464 for probes and Prometheus in a
    /// host-network pod). Off unless set.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) metrics_addr: Option<String>,
    /// `nri`: run as an NRI plugin of the container runtime (containerd, CRI-O): its pod
    /// and container events drive admission.
    #[arg(long)]
    pub(crate) nri: bool,
    /// `nriSocket`: the runtime's NRI socket (default /var/run/nri/nri.sock).
    #[arg(long, value_name = "PATH")]
    pub(crate) nri_socket: Option<PathBuf>,
    /// `nriPluginIndex`: the two-digit index corral registers with (default 50).
    #[arg(long, value_name = "NN")]
    pub(crate) nri_plugin_index: Option<String>,
    /// `kubeletPodResourcesSocket`: in NRI mode, the kubelet's podresources socket, read for
    /// the devices it gave each container (default
    /// /var/lib/kubelet/pod-resources/kubelet.sock).
    #[arg(long, value_name = "PATH")]
    pub(crate) kubelet_pod_resources_socket: Option<PathBuf>,
    /// `nriGuardPinnedCpusets`: in NRI mode, reject another NRI plugin's change of the cpuset
    /// CPUs or memory nodes corral gave a pinned container (the container is not created;
    /// needs an NRI v0.10 runtime: containerd 2.2, CRI-O 1.34). Default true.
    #[arg(long, value_name = "BOOL")]
    pub(crate) nri_guard_pinned_cpusets: Option<bool>,
    /// `nriDisconnectedGracePeriod`: in NRI mode, how long corral may be without a
    /// synchronized connection to the runtime (since it started or lost it) before
    /// `/healthz` fails (default 1m).
    #[arg(long, value_name = "DURATION")]
    pub(crate) nri_disconnected_grace_period: Option<String>,
    /// `kubeconfig`: the API server to publish the node's NodeResourceTopology to (the
    /// kubelet's flag). In a pod, the service account is used when this is not set.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// `nodeName`: the node's name, and its NodeResourceTopology's (the kubelet's
    /// `--hostname-override`; in a DaemonSet `--node-name=$(NODE_NAME)` from the downward
    /// API). Unset: nothing is published.
    #[arg(long, value_name = "NAME")]
    pub(crate) node_name: Option<String>,
}

/// The pairs of one `KEY=VALUE,KEY=VALUE` flag value, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyValues(pub(crate) Vec<(String, String)>);

/// Why a `KEY=VALUE,...` flag value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed pair {pair:?}, expect KEY=VALUE (several separated by commas)")]
pub(crate) struct KeyValueError {
    /// The piece without `=`.
    pair: String,
}

/// One value of a map flag, as the kubelet's `mapStringString` flags read it
/// (`k8s.io/component-base/cli/flag`): pairs separated by commas, empty pieces skipped,
/// each split at its first `=`, key and value trimmed of spaces. Over several occurrences
/// the later value of a key wins.
pub(crate) fn parse_key_values(text: &str) -> Result<KeyValues, KeyValueError> {
    text.split(',')
        .filter(|piece| !piece.is_empty())
        .map(|piece| match piece.split_once('=') {
            Some((key, value)) => Ok((key.trim().to_owned(), value.trim().to_owned())),
            None => Err(KeyValueError {
                pair: piece.to_owned(),
            }),
        })
        .collect::<Result<_, _>>()
        .map(KeyValues)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Cli {
        Cli::parse_args(std::iter::once("corral").chain(args.iter().copied()))
            .unwrap_or_else(|err| panic!("{args:?}: {err}"))
    }

    /// The `config check` arguments of a command line.
    fn config_args(args: &[&str]) -> ConfigArgs {
        match parse(args).command {
            Command::Config {
                command: ConfigCommand::Check(args),
            } => *args,
            other => panic!("{other:?}"),
        }
    }

    /// What the agent would run with: the validated config, printed whole.
    fn loaded(args: &[&str]) -> String {
        let (config, _) =
            crate::config::load(&config_args(args)).unwrap_or_else(|err| panic!("{args:?}: {err}"));
        format!("{config:?}")
    }

    #[test]
    fn kubelet_flag_spellings_give_the_same_config() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let corral = loaded(&[
            "config",
            "check",
            "--root",
            root,
            "--cpu-manager-policy",
            "static",
            "--reserved-system-cpus",
            "0-1",
            "--cpu-manager-policy-option",
            "full-pcpus-only=true",
            "--cpu-manager-policy-option",
            "distribute-cpus-across-numa=true",
            "--topology-manager-policy",
            "restricted",
            "--topology-manager-policy-option",
            "prefer-closest-numa-nodes=true",
        ]);
        let kubelet = loaded(&[
            "config",
            "check",
            "--root",
            root,
            "--cpu-manager-policy=static",
            "--reserved-cpus=0-1",
            "--cpu-manager-policy-options=full-pcpus-only=true,distribute-cpus-across-numa=true",
            "--topology-manager-policy=restricted",
            "--topology-manager-policy-options",
            "prefer-closest-numa-nodes=true",
        ]);
        assert_eq!(corral, kubelet);
        assert!(
            corral.contains("full-pcpus-only") && corral.contains("distribute-cpus-across-numa")
        );
        assert!(
            corral.contains(r#"reserved_system_cpus: CpuSet("0-1")"#),
            "{corral}"
        );
    }

    /// Each kubelet flag gives the config its KubeletConfiguration key gives.
    #[test]
    fn kubelet_flags_give_the_config_their_keys_give() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        let file = dir.path().join("config.yaml");
        std::fs::write(
            &file,
            format!(
                "root: {}\nfeatureGates: {{PodLevelResourceManagers: false, CPUManagerPolicyAlphaOptions: true}}\n\
                 memoryManagerPolicy: Static\nreservedMemory:\n  - {{numaNode: 0, limits: {{memory: 1124Mi, hugepages-2Mi: 2Mi}}}}\n  - {{numaNode: 1, limits: {{memory: 1Gi}}}}\n\
                 kubeReserved: {{cpu: 500m, memory: 1Gi}}\nsystemReserved: {{cpu: '1', memory: 100Mi}}\n\
                 cpuManagerReconcilePeriod: 5s\n",
                root.display()
            ),
        )
        .unwrap();
        let from_file = loaded(&["config", "check", "-c", file.to_str().unwrap()]);
        let from_flags = loaded(&[
            "config",
            "check",
            "--root-dir",
            root.to_str().unwrap(),
            "--feature-gates",
            "PodLevelResourceManagers=false",
            "--feature-gates=CPUManagerPolicyAlphaOptions=true",
            "--memory-manager-policy",
            "Static",
            "--reserved-memory",
            "0:memory=1124Mi,hugepages-2Mi=2Mi;1:memory=1Gi",
            "--kube-reserved",
            "cpu=500m,memory=1Gi",
            "--system-reserved=cpu=1",
            "--system-reserved=memory=100Mi",
            "--cpu-manager-reconcile-period=5s",
        ]);
        assert_eq!(from_file, from_flags);
        for part in [
            "reconcile_period: 5s",
            "reserved_cpu_millis: Some(1500)",
            "numa_node: 1",
            "hugepages-2Mi",
        ] {
            assert!(from_flags.contains(part), "{part}: {from_flags}");
        }
        // The same with --reserved-memory given once per node.
        let split = loaded(&[
            "config",
            "check",
            "-c",
            file.to_str().unwrap(),
            "--reserved-memory=0:memory=1124Mi,hugepages-2Mi=2Mi",
            "--reserved-memory=1:memory=1Gi",
        ]);
        assert_eq!(split, from_file);
    }

    /// Flags override the file: feature gates gate by gate (the kubelet's
    /// `kubeletConfigFlagPrecedence`), every other map and list whole.
    #[test]
    fn kubelet_flags_override_the_files_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        std::fs::write(
            &file,
            "featureGates: {PodLevelResourceManagers: false, CPUManagerPolicyAlphaOptions: true}\n\
             kubeReserved: {cpu: 500m, memory: 1Gi}\nmemoryManagerPolicy: Static\n\
             reservedMemory: [{numaNode: 0, limits: {memory: 1124Mi}}]\n\
             cpuManagerReconcilePeriod: 5s\n",
        )
        .unwrap();
        let args = config_args(&[
            "config",
            "check",
            "-c",
            file.to_str().unwrap(),
            "--root",
            dir.path().to_str().unwrap(),
            "--feature-gates",
            "CPUManagerPolicyAlphaOptions=false",
            "--kube-reserved=cpu=2",
            "--memory-manager-policy=None",
            "--reserved-memory=1:memory=1Gi",
            "--cpu-manager-reconcile-period=1m",
        ]);
        let (config, _) = crate::config::load(&args).unwrap();
        let gates = &config.feature_gates;
        use corral_topology::Feature;
        assert!(
            !gates.enabled(Feature::PodLevelResourceManagers),
            "the file's gate stays"
        );
        assert!(
            !gates.enabled(Feature::CpuManagerPolicyAlphaOptions),
            "the flag wins"
        );
        assert_eq!(config.cpu_manager.reserved_cpu_millis, Some(2000));
        let memory = &config.memory_manager;
        assert!(
            !memory.kube_reserved.contains_key("memory"),
            "replaced whole"
        );
        assert_eq!(memory.policy, corral_memmgr::MemoryPolicy::None);
        let nodes: Vec<usize> = memory.reserved_memory.iter().map(|r| r.numa_node).collect();
        assert_eq!(nodes, [1]);
        assert_eq!(
            config.cpu_manager.reconcile_period,
            std::time::Duration::from_secs(60)
        );
        // `--root-dir` is `--root`: one of them, once.
        let err = Cli::parse_args([
            "corral",
            "config",
            "check",
            "--root",
            "/a",
            "--root-dir",
            "/b",
        ])
        .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::ArgumentConflict,
            "{err}"
        );
    }

    #[test]
    fn kubelet_flag_values_are_refused_with_upstreams_messages() {
        let err = |args: &[&str]| {
            let args = ["corral", "config", "check"].iter().chain(args);
            Cli::parse_args(args).unwrap_err().to_string()
        };
        let text = err(&["--feature-gates", "A=maybe"]);
        assert!(
            text.contains(r#"invalid value of A: maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax"#),
            "{text}"
        );
        let text = err(&["--reserved-memory", "0:cpu=1"]);
        assert!(
            text.contains(r#"memory type conversion error, unknown type: "cpu""#),
            "{text}"
        );
        let text = err(&["--kube-reserved", "cpu"]);
        assert!(text.contains(r#"malformed pair "cpu""#), "{text}");
        // Values the flags parse are still validated as the keys are.
        let args = config_args(&["config", "check", "--cpu-manager-reconcile-period", "soon"]);
        let errors = crate::config::load(&args).unwrap_err().to_string();
        assert!(
            errors.contains("cpuManagerReconcilePeriod: \"soon\""),
            "{errors}"
        );
        let args = config_args(&["config", "check", "--memory-manager-policy", "static"]);
        let errors = crate::config::load(&args).unwrap_err().to_string();
        assert!(
            errors.contains("memoryManagerPolicy: \"static\""),
            "{errors}"
        );
    }

    #[test]
    fn map_flags_read_as_the_kubelets_map_string_string() {
        let args = config_args(&[
            "config",
            "check",
            "--cpu-manager-policy-options",
            " a = 1 ,b=2,,",
            "--cpu-manager-policy-options=a=3,c=x=y",
        ]);
        let pairs: Vec<(String, String)> = args
            .cpu_manager_policy_option
            .iter()
            .flat_map(|kv| kv.0.clone())
            .collect();
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            pairs,
            [
                pair("a", "1"),
                pair("b", "2"),
                pair("a", "3"),
                pair("c", "x=y")
            ]
        );
        let err = Cli::parse_args([
            "corral",
            "config",
            "check",
            "--cpu-manager-policy-options",
            "a=1,b",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("malformed pair \"b\""), "{err}");
    }

    #[test]
    fn klog_verbosity_and_logging_format_spellings() {
        let cli = parse(&["-v=4", "topology"]);
        assert_eq!((cli.klog_verbosity, cli.verbose), (Some(4), 0));
        let cli = parse(&["topology", "--v=2", "--logging-format=json"]);
        assert_eq!(cli.klog_verbosity, Some(2));
        assert_eq!(cli.log_format, LogFormat::Json);
        let cli = parse(&["topology", "--v", "3", "--logging-format", "text"]);
        assert_eq!(
            (cli.klog_verbosity, cli.log_format),
            (Some(3), LogFormat::Text)
        );
        // corral's own spellings keep working.
        let cli = parse(&["-vv", "topology", "--log-format", "json"]);
        assert_eq!((cli.verbose, cli.klog_verbosity), (2, None));
        assert_eq!(cli.log_format, LogFormat::Json);
        assert_eq!(parse(&["topology", "-v"]).verbose, 1);
        assert!(Cli::parse_args(["corral", "-v=x", "topology"]).is_err());
    }
}

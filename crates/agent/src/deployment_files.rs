//! Checks of the deployment files shipped with the agent (`deploy/daemonset.yaml`,
//! `Dockerfile`), run by `cargo test`: no cluster or Docker engine is needed to know that
//! their manifests are valid Kubernetes objects, that their configuration passes the agent's
//! own validation, and that the command lines they run parse.

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::ConfigMap;

    use crate::cli::{Cli, Command};
    use crate::config::ConfigSource;

    fn workspace_file(rel: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn run_args(args: &[String]) -> Cli {
        let mut argv = vec!["corral".to_owned()];
        argv.extend(args.iter().cloned());
        let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        assert!(
            matches!(cli.command, Command::Run { .. }),
            "{argv:?} is not `corral run`"
        );
        cli
    }

    /// The document of `kind` in a multi-document manifest, as `T`.
    fn of_kind<T: serde::de::DeserializeOwned>(docs: &[serde_json::Value], kind: &str) -> T {
        let doc = docs.iter().find(|d| d["kind"] == kind);
        serde_json::from_value(doc.unwrap_or_else(|| panic!("no {kind}")).clone()).unwrap()
    }

    #[test]
    fn daemonset_manifests_are_valid_and_consistent() {
        for file in ["deploy/daemonset.yaml", "deploy/daemonset-nri.yaml"] {
            check_daemonset(file);
        }
        // The NRI variant runs as an NRI plugin and reaches the runtime's socket directory.
        let text = workspace_file("deploy/daemonset-nri.yaml");
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        let config_map: ConfigMap = of_kind(&docs, "ConfigMap");
        let source: ConfigSource =
            serde_saphyr::from_str(&config_map.data.unwrap()["config.yaml"]).unwrap();
        let config = source.validate().unwrap();
        assert!(matches!(config.nri, crate::config::NriMode::Plugin(_)));
        let daemonset: DaemonSet = of_kind(&docs, "DaemonSet");
        let pod = daemonset.spec.unwrap().template.spec.unwrap();
        let mounts = pod.containers[0].volume_mounts.clone().unwrap_or_default();
        assert!(mounts.iter().any(|m| m.mount_path == "/var/run/nri"));
    }

    /// A DaemonSet manifest file: valid objects, a config the agent accepts, a command
    /// line that parses, every mount backed by a volume, sysfs read-only.
    fn check_daemonset(file: &str) {
        let text = workspace_file(file);
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        let config_map: ConfigMap = of_kind(&docs, "ConfigMap");
        let config_yaml = &config_map.data.as_ref().unwrap()["config.yaml"];
        let source: ConfigSource = serde_saphyr::from_str(config_yaml).unwrap();
        assert!(
            source.unknown_keys().is_empty(),
            "{:?}",
            source.unknown_keys()
        );
        source.validate().unwrap();

        let daemonset: DaemonSet = of_kind(&docs, "DaemonSet");
        let pod = daemonset.spec.unwrap().template.spec.unwrap();
        let container = &pod.containers[0];
        run_args(container.args.as_ref().unwrap());
        let volumes = pod.volumes.unwrap_or_default();
        for mount in container.volume_mounts.iter().flatten() {
            assert!(
                volumes.iter().any(|v| v.name == mount.name),
                "mount {} has no volume",
                mount.name
            );
        }
        let sys = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/host/sys")
            .expect("the host's sysfs is mounted");
        assert_eq!(sys.read_only, Some(true), "sysfs is mounted read-only");
        // The node's name reaches `--node-name` from the downward API, and the pod runs as
        // the service account deploy/rbac.yaml lets write NodeResourceTopologies.
        let args = container.args.as_ref().unwrap();
        let at = args
            .iter()
            .position(|a| a == "--node-name")
            .expect("--node-name");
        assert_eq!(args[at + 1], "$(NODE_NAME)");
        let env = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "NODE_NAME");
        let field = env
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(field, Some("spec.nodeName"));
        assert_eq!(pod.service_account_name.as_deref(), Some("corral"));
    }

    #[test]
    fn the_crd_and_rbac_let_corral_keep_its_noderesourcetopology() {
        use k8s_openapi::api::core::v1::ServiceAccount;
        use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&workspace_file("deploy/crd/noderesourcetopologies.yaml"))
                .unwrap();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{}.{}", corral_nrt::PLURAL, corral_nrt::GROUP).as_str())
        );
        assert_eq!(crd.spec.group, corral_nrt::GROUP);
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, corral_nrt::KIND);
        let stored: Vec<_> = crd.spec.versions.iter().filter(|v| v.storage).collect();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].name, corral_nrt::VERSION);
        // A *.k8s.io group's CRD is refused without the API review annotation.
        let annotations = crd.metadata.annotations.unwrap_or_default();
        assert!(annotations.contains_key("api-approved.kubernetes.io"));

        let text = workspace_file("deploy/rbac.yaml");
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        let account: ServiceAccount = of_kind(&docs, "ServiceAccount");
        let role: ClusterRole = of_kind(&docs, "ClusterRole");
        let binding: ClusterRoleBinding = of_kind(&docs, "ClusterRoleBinding");
        let rule = &role.rules.unwrap()[0];
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&[corral_nrt::GROUP.to_owned()][..])
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(&[corral_nrt::PLURAL.to_owned()][..])
        );
        for verb in ["get", "create", "update"] {
            assert!(rule.verbs.iter().any(|v| v == verb), "{verb}");
        }
        assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(Some(&subject.name), account.metadata.name.as_ref());
        assert_eq!(subject.namespace, account.metadata.namespace);
    }

    #[test]
    fn dockerfile_default_command_parses() {
        let text = workspace_file("Dockerfile");
        let cmd = text
            .lines()
            .find_map(|l| l.strip_prefix("CMD "))
            .expect("a CMD line");
        let args: Vec<String> = serde_json::from_str(cmd).unwrap();
        run_args(&args);
        assert!(text.contains("ENTRYPOINT [\"/usr/local/bin/corral\"]"));
    }
}

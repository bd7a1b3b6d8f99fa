//! Checks of `deploy/`'s kustomize tree, run by `cargo test`: every overlay
//! (`deploy/overlays/{nri,nri-nrt,admission-api,admission-api-nrt}`) built by a real
//! `kubectl kustomize` (kubectl 1.36.4 from the API-server bundle, `cargo xtask
//! apiserver-bundle`), and the objects it renders checked: a config the agent accepts with
//! the flags the DaemonSet passes, in the overlay's mode; probes and the metrics port on
//! the configured address's port; tolerations, resource requests, mounts backed by
//! volumes, sysfs read-only; the NodeResourceTopology CRD, role and token exactly when the
//! overlay publishes it.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    use clap::Parser as _;
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use crate::cli::{Cli, Command as CliCommand};
    use crate::config::{ConfigSource, NriMode};

    /// Every overlay, and whether it runs corral as an NRI plugin and publishes the
    /// NodeResourceTopology.
    const OVERLAYS: &[(&str, bool, bool)] = &[
        ("nri", true, false),
        ("nri-nrt", true, true),
        ("admission-api", false, false),
        ("admission-api-nrt", false, true),
    ];

    fn deploy() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
    }

    /// `kubectl kustomize deploy/overlays/NAME`'s documents, or `None` (printed) when there
    /// is no bundle to take kubectl from.
    fn kustomize(overlay: &str) -> Option<Vec<serde_json::Value>> {
        let bundle = match corral_testkit::ApiServerBundle::locate() {
            Ok(bundle) => bundle,
            Err(why) => {
                eprintln!("skipped: kubectl kustomize needs the API-server bundle: {why}");
                return None;
            }
        };
        let home = tempfile::tempdir().unwrap();
        let kubectl = bundle.dir().join("bin/kubectl");
        let out = Command::new(&kubectl)
            .env_remove("KUBECONFIG")
            .env("HOME", home.path())
            .arg("kustomize")
            .arg(deploy().join("overlays").join(overlay))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", kubectl.display()));
        assert!(
            out.status.success(),
            "kubectl kustomize {overlay}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        Some(serde_saphyr::from_multiple(&text).unwrap())
    }

    /// The one document of `kind` (none or two is a failure), as `T`.
    fn one<T: serde::de::DeserializeOwned>(docs: &[serde_json::Value], kind: &str) -> T {
        let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "{kind}: {found:?}");
        serde_json::from_value(found[0].clone()).unwrap()
    }

    fn count(docs: &[serde_json::Value], kind: &str) -> usize {
        docs.iter().filter(|d| d["kind"] == kind).count()
    }

    #[test]
    fn every_overlay_builds_with_kubectl_kustomize_and_its_objects_hold_together() {
        for &(overlay, nri, nrt) in OVERLAYS {
            let Some(docs) = kustomize(overlay) else {
                return;
            };
            let daemonset: DaemonSet = one(&docs, "DaemonSet");
            assert_eq!(
                daemonset.metadata.namespace.as_deref(),
                Some("kube-system"),
                "{overlay}"
            );
            let template = daemonset.spec.unwrap().template;
            let pod = template.spec.unwrap();
            let container = &pod.containers[0];
            let config_map: ConfigMap = one(&docs, "ConfigMap");
            check_config(overlay, &pod, container, &config_map, nri, nrt);
            // Prometheus scrapes the port the probes use.
            let annotations = template.metadata.unwrap().annotations.unwrap_or_default();
            let port = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some("metrics"));
            assert_eq!(
                annotations.get("prometheus.io/port"),
                port.map(|p| p.container_port.to_string()).as_ref(),
                "{overlay}: the scrape annotation's port"
            );
            check_pod(overlay, &pod, container);
            check_publishing(overlay, &docs, &pod, container, nrt);
        }
    }

    /// The config the pod runs with: the generated ConfigMap it mounts, and its flags.
    fn check_config(
        overlay: &str,
        pod: &PodSpec,
        container: &Container,
        config_map: &ConfigMap,
        nri: bool,
        nrt: bool,
    ) {
        let volumes = pod.volumes.as_deref().unwrap_or_default();
        let config_volume = volumes.iter().find(|v| v.name == "config").unwrap();
        let mounted = config_volume.config_map.as_ref().unwrap().name.clone();
        assert_eq!(Some(mounted), config_map.metadata.name.clone(), "{overlay}");
        let data = config_map.data.as_ref().unwrap();
        // One config: a second file in the ConfigMap would be one corral never reads.
        let files: Vec<&String> = data.keys().collect();
        assert_eq!(files, ["config.yaml"], "{overlay}");
        assert!(config_map.binary_data.is_none(), "{overlay}");
        let text = &data["config.yaml"];
        let file: ConfigSource = serde_saphyr::from_str(text).unwrap();
        assert!(
            file.unknown_keys().is_empty(),
            "{overlay}: {:?}",
            file.unknown_keys()
        );

        // The command line parses as `corral run`; its config file is the mounted one.
        // The kubelet expands `$(VAR)` from the container's env; a downward-API node name
        // is some node's.
        let expand = |arg: &String| {
            container
                .env
                .iter()
                .flatten()
                .fold(arg.clone(), |arg, var| {
                    let value = match var.value_from.as_ref().and_then(|v| v.field_ref.as_ref()) {
                        Some(field) if field.field_path == "spec.nodeName" => "worker-1".to_owned(),
                        _ => var.value.clone().unwrap_or_default(),
                    };
                    arg.replace(&format!("$({})", var.name), &value)
                })
        };
        let mut argv = vec!["corral".to_owned()];
        argv.extend(container.args.iter().flatten().map(expand));
        assert!(
            !argv.iter().any(|a| a.contains("$(")),
            "{overlay}: {argv:?}"
        );
        let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let CliCommand::Run { config: args, .. } = cli.command else {
            panic!("{overlay}: {argv:?} is not `corral run`");
        };
        let path = args.config.clone().unwrap();
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "config")
            .unwrap();
        assert_eq!(
            path,
            Path::new(&mount.mount_path).join("config.yaml"),
            "{overlay}"
        );
        // Validated as `run` would: the file's keys, then the flags over them.
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("config.yaml");
        std::fs::write(&copy, text).unwrap();
        let mut args = args;
        args.config = Some(copy);
        // In a pod: the service account is the API server's credentials.
        let (config, unknown) =
            crate::config::load_as(&args, true).unwrap_or_else(|e| panic!("{overlay}: {e}"));
        assert!(unknown.is_empty(), "{overlay}");
        assert_eq!(matches!(config.nri, NriMode::Plugin(_)), nri, "{overlay}");
        assert_eq!(
            config.container_runtime_endpoint.is_some(),
            !nri,
            "{overlay}"
        );
        assert_eq!(config.nrt.is_some(), nrt, "{overlay}");

        // Probes and the metrics port on the port corral serves them.
        let addr = config.metrics_address.expect("metricsAddress");
        assert!(addr.ip().is_unspecified(), "{overlay}: probes reach {addr}");
        let port = container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some("metrics"))
            .unwrap();
        assert_eq!(port.container_port, i32::from(addr.port()), "{overlay}");
        for (probe, path) in [
            (container.liveness_probe.as_ref(), "/healthz"),
            (container.readiness_probe.as_ref(), "/readyz"),
        ] {
            let get = probe.and_then(|p| p.http_get.as_ref()).expect(path);
            assert_eq!(get.path.as_deref(), Some(path), "{overlay}");
            assert_eq!(get.port, IntOrString::String("metrics".into()), "{overlay}");
        }
    }

    /// What every overlay's pod needs on a node.
    fn check_pod(overlay: &str, pod: &PodSpec, container: &Container) {
        assert_eq!(pod.host_network, Some(true), "{overlay}");
        let tolerations = pod.tolerations.as_deref().unwrap_or_default();
        assert!(
            tolerations
                .iter()
                .any(|t| t.operator.as_deref() == Some("Exists")
                    && t.key.is_none()
                    && t.effect.is_none()
                    && t.toleration_seconds.is_none()),
            "{overlay}: every taint tolerated, of every effect, for ever"
        );
        let security = container
            .security_context
            .as_ref()
            .expect("a securityContext");
        assert_eq!(security.read_only_root_filesystem, Some(true), "{overlay}");
        assert_eq!(
            security.allow_privilege_escalation,
            Some(false),
            "{overlay}"
        );
        assert_ne!(security.privileged, Some(true), "{overlay}");
        let resources = container.resources.as_ref().unwrap();
        let requests = resources.requests.as_ref().unwrap();
        assert!(
            requests.contains_key("cpu") && requests.contains_key("memory"),
            "{overlay}"
        );
        assert!(
            resources.limits.as_ref().unwrap().contains_key("memory"),
            "{overlay}"
        );
        let volumes = pod.volumes.as_deref().unwrap_or_default();
        for mount in container.volume_mounts.iter().flatten() {
            assert!(
                volumes.iter().any(|v| v.name == mount.name),
                "{overlay}: mount {} has no volume",
                mount.name
            );
        }
        let sys = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/host/sys")
            .expect("the host's sysfs is mounted");
        assert_eq!(sys.read_only, Some(true), "{overlay}: sysfs is read-only");
        let mounted = |path: &str| {
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == path)
        };
        if overlay.starts_with("nri") {
            assert!(mounted("/var/run/nri"), "{overlay}");
            assert!(mounted("/var/lib/kubelet/pod-resources"), "{overlay}");
        } else {
            assert!(mounted("/run/containerd/containerd.sock"), "{overlay}");
        }
    }

    /// The CRD, the role, the token and `--node-name` exactly when the overlay publishes.
    fn check_publishing(
        overlay: &str,
        docs: &[serde_json::Value],
        pod: &PodSpec,
        container: &Container,
        nrt: bool,
    ) {
        let account: ServiceAccount = one(docs, "ServiceAccount");
        assert_eq!(pod.service_account_name, account.metadata.name, "{overlay}");
        assert_eq!(
            account.automount_service_account_token,
            Some(nrt),
            "{overlay}"
        );
        assert_eq!(pod.automount_service_account_token, Some(nrt), "{overlay}");
        let args = container.args.clone().unwrap_or_default();
        assert_eq!(
            args.iter().any(|a| a == "--node-name=$(NODE_NAME)"),
            nrt,
            "{overlay}"
        );
        if !nrt {
            for kind in [
                "CustomResourceDefinition",
                "ClusterRole",
                "ClusterRoleBinding",
            ] {
                assert_eq!(count(docs, kind), 0, "{overlay}: {kind}");
            }
            return;
        }
        let env = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "NODE_NAME");
        let field = env
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(field, Some("spec.nodeName"), "{overlay}");
        assert_eq!(count(docs, "CustomResourceDefinition"), 1, "{overlay}");
        let role: ClusterRole = one(docs, "ClusterRole");
        let binding: ClusterRoleBinding = one(docs, "ClusterRoleBinding");
        // One rule, and no verb beyond what keeping its NodeResourceTopology takes.
        let rules = role.rules.unwrap();
        assert_eq!(rules.len(), 1, "{overlay}: {rules:?}");
        let rule = &rules[0];
        for verb in &rule.verbs {
            assert!(
                ["get", "create", "update", "patch"].contains(&verb.as_str()),
                "{overlay}: verb {verb}"
            );
        }
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&[corral_nrt::GROUP.to_owned()][..])
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(&[corral_nrt::PLURAL.to_owned()][..])
        );
        assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(Some(&subject.name), account.metadata.name.as_ref());
        assert_eq!(subject.namespace, account.metadata.namespace, "{overlay}");
    }

    /// Without kubectl too: the base's config is one the agent accepts, and every
    /// kustomization names files that exist.
    #[test]
    fn the_base_config_is_valid_and_every_kustomization_names_existing_files() {
        let text = std::fs::read_to_string(deploy().join("base/config.yaml")).unwrap();
        let source: ConfigSource = serde_saphyr::from_str(&text).unwrap();
        assert!(source.unknown_keys().is_empty());
        source.validate().unwrap();
        let mut dirs = vec![deploy().join("base"), deploy().join("crd")];
        for sub in ["components", "overlays"] {
            for entry in std::fs::read_dir(deploy().join(sub)).unwrap() {
                dirs.push(entry.unwrap().path());
            }
        }
        assert_eq!(dirs.len(), 2 + 3 + OVERLAYS.len());
        for dir in dirs {
            let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
            let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
            let mut named: Vec<String> = Vec::new();
            for key in ["resources", "components"] {
                for item in doc[key].as_array().into_iter().flatten() {
                    named.push(item.as_str().unwrap().to_owned());
                }
            }
            for generator in doc["configMapGenerator"].as_array().into_iter().flatten() {
                for file in generator["files"].as_array().unwrap() {
                    named.push(file.as_str().unwrap().to_owned());
                }
            }
            for name in named {
                assert!(dir.join(&name).exists(), "{}: {name}", dir.display());
            }
        }
    }
}

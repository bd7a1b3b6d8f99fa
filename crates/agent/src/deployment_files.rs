//! Checks of the deployment files shipped with the agent (`deploy/crd/`, the role in
//! `deploy/components/nrt/`, `Dockerfile`, `.dockerignore`; the kustomize overlays in
//! `deploy_overlays`), run by `cargo test`: no cluster or Docker engine is needed to know
//! that their manifests are valid Kubernetes objects, that the command lines they run
//! parse, and that the Dockerfile builds the image `cargo xtask image` assembles offline.

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use k8s_openapi::api::apps::v1::DaemonSet;

    use crate::cli::{Cli, Command};

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

        let account: ServiceAccount =
            serde_saphyr::from_str(&workspace_file("deploy/base/serviceaccount.yaml")).unwrap();
        let text = workspace_file("deploy/components/nrt/rbac.yaml");
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
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
        // The namespace is kustomize's (the base's `namespace: kube-system`).
        assert_eq!(subject.namespace.as_deref(), Some("kube-system"));
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

    /// The Dockerfile and `cargo xtask image` (corral_testkit::oci_image) build the same
    /// image: entrypoint, default arguments (deploy/base's DaemonSet's, which the overlays
    /// extend), the `corral` user and its state dir.
    #[test]
    fn the_dockerfile_the_offline_image_and_the_base_daemonset_agree() {
        use corral_testkit::oci_image;

        let text = workspace_file("Dockerfile");
        let json_line = |prefix: &str| -> Vec<String> {
            let line = text.lines().find_map(|l| l.strip_prefix(prefix));
            serde_json::from_str(line.unwrap_or_else(|| panic!("no {prefix}"))).unwrap()
        };
        assert_eq!(json_line("ENTRYPOINT "), [oci_image::ENTRYPOINT]);
        assert_eq!(json_line("CMD "), oci_image::DEFAULT_ARGS);
        let uid = oci_image::CORRAL_UID;
        assert!(text.contains(&format!("--uid {uid} --gid {uid}")), "{text}");
        assert!(text.contains(&format!(
            "-o {uid} -g {uid} -m 0755 {}",
            oci_image::STATE_DIR
        )));
        run_args(&oci_image::DEFAULT_ARGS.map(str::to_owned));

        // The base DaemonSet runs the image's default command (the overlays add flags).
        let base: DaemonSet =
            serde_saphyr::from_str(&workspace_file("deploy/base/daemonset.yaml")).unwrap();
        let pod = base.spec.unwrap().template.spec.unwrap();
        assert_eq!(
            pod.containers[0].args.clone().unwrap(),
            oci_image::DEFAULT_ARGS
        );
        assert_eq!(pod.containers[0].image.as_deref(), Some("corral"));
        let kustomization = workspace_file("deploy/base/kustomization.yaml");
        assert!(kustomization.contains("newTag: dev"), "{kustomization}");
        assert!(oci_image::REFERENCE.ends_with("/corral:dev"));
    }

    /// `docker build`'s context leaves out the build output and the venv (`COPY . .` would
    /// otherwise send gigabytes) and git's history.
    #[test]
    fn the_docker_build_context_leaves_out_target_and_the_venv() {
        let ignored = workspace_file(".dockerignore");
        let patterns: Vec<&str> = ignored
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        for needed in ["target/", ".venv/", ".git/"] {
            assert!(patterns.contains(&needed), "{needed} in {patterns:?}");
        }
        assert!(!patterns.iter().any(|p| p.starts_with('!')), "{patterns:?}");
    }
}

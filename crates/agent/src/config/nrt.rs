//! `kubeconfig`, `nodeName`, `nodeResourceTopologyResyncPeriod`: whether corral publishes the
//! node's NodeResourceTopology to an API server, as whom and how often it checks the object.
//! With no node name nothing talks to an API server.

use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigErrors, ConfigSource};

/// How often the publisher reads the object back and rewrites it if it differs, besides
/// writing after every change (resource-topology-exporter's default `--sleep-interval`).
pub(crate) const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(60);

/// Where corral publishes its NodeResourceTopology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NrtSettings {
    /// The node's name: the object's name.
    pub(crate) node_name: String,
    /// How corral reaches the API server.
    pub(crate) credentials: Credentials,
    /// How often the object is checked against the server besides the writes after changes.
    pub(crate) resync_period: Duration,
}

/// How corral reaches the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// A kubeconfig file (`--kubeconfig`), its current context.
    Kubeconfig(PathBuf),
    /// The pod's service account (`KUBERNETES_SERVICE_HOST` and the token mounted under
    /// `/var/run/secrets/kubernetes.io/serviceaccount`), when run as a DaemonSet.
    InCluster,
}

impl ConfigSource {
    /// The publishing settings, when a node name is set.
    pub(super) fn nrt_settings(&self, errors: &mut ConfigErrors) -> Option<NrtSettings> {
        let resync_period = errors.duration(
            "nodeResourceTopologyResyncPeriod",
            self.node_resource_topology_resync_period.as_deref(),
            DEFAULT_RESYNC_PERIOD,
        );
        if resync_period < Duration::from_secs(1) {
            errors.push(
                "nodeResourceTopologyResyncPeriod",
                self.node_resource_topology_resync_period
                    .as_deref()
                    .unwrap_or_default(),
                "at least 1s",
            );
        }
        let kubeconfig = self
            .kubeconfig
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let node_name = match self.node_name.as_deref() {
            None | Some("") => {
                if let Some(path) = kubeconfig {
                    errors.push(
                        "kubeconfig",
                        &path.display().to_string(),
                        "unset, or set with nodeName (--node-name): the kubeconfig is only used to publish the node's NodeResourceTopology",
                    );
                }
                return None;
            }
            Some(name) => name,
        };
        if !is_dns_subdomain(node_name) {
            errors.push(
                "nodeName",
                node_name,
                "a node name: lowercase letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit",
            );
        }
        let credentials = match kubeconfig {
            Some(path) => Credentials::Kubeconfig(path.clone()),
            None if self.in_cluster => Credentials::InCluster,
            None => {
                errors.push(
                    "kubeconfig",
                    "",
                    "a kubeconfig file (--kubeconfig) when nodeName is set outside a pod (KUBERNETES_SERVICE_HOST is not set)",
                );
                return None;
            }
        };
        Some(NrtSettings {
            node_name: node_name.to_owned(),
            credentials,
            resync_period,
        })
    }
}

/// RFC 1123 subdomain, as the API server checks object names.
fn is_dns_subdomain(name: &str) -> bool {
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 253
        && name.split('.').all(|label| {
            let l = label.as_bytes();
            !l.is_empty()
                && edge(l[0])
                && edge(l[l.len() - 1])
                && l.iter().all(|&b| edge(b) || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(source: ConfigSource) -> Result<Option<NrtSettings>, ConfigErrors> {
        let mut errors = ConfigErrors::default();
        let settings = source.nrt_settings(&mut errors);
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn nothing_is_published_without_a_node_name() {
        assert_eq!(settings(ConfigSource::default()), Ok(None));
        let in_pod = ConfigSource {
            in_cluster: true,
            ..ConfigSource::default()
        };
        assert_eq!(settings(in_pod), Ok(None));
    }

    #[test]
    fn a_node_name_publishes_with_the_kubeconfig_or_in_a_pod() {
        let with_file = ConfigSource {
            node_name: Some("worker-1".into()),
            kubeconfig: Some("/etc/kubernetes/corral.conf".into()),
            node_resource_topology_resync_period: Some("30s".into()),
            ..ConfigSource::default()
        };
        let published = settings(with_file).unwrap().unwrap();
        assert_eq!(
            published.credentials,
            Credentials::Kubeconfig("/etc/kubernetes/corral.conf".into())
        );
        assert_eq!(published.resync_period, Duration::from_secs(30));
        let in_pod = ConfigSource {
            node_name: Some("worker-1".into()),
            in_cluster: true,
            ..ConfigSource::default()
        };
        let published = settings(in_pod).unwrap().unwrap();
        assert_eq!(published.credentials, Credentials::InCluster);
        assert_eq!(published.resync_period, DEFAULT_RESYNC_PERIOD);
    }

    #[test]
    fn refusals_name_the_key() {
        let cases = [
            (Some("worker-1"), None, false, None, "kubeconfig"),
            (None, Some("/k.conf"), false, None, "kubeconfig"),
            (Some("Worker_1"), Some("/k.conf"), false, None, "nodeName"),
            (Some("a..b"), None, true, None, "nodeName"),
            (
                Some("w"),
                None,
                true,
                Some("500ms"),
                "nodeResourceTopologyResyncPeriod",
            ),
            (
                Some("w"),
                None,
                true,
                Some("often"),
                "nodeResourceTopologyResyncPeriod",
            ),
        ];
        for (node, kubeconfig, in_cluster, resync, key) in cases {
            let source = ConfigSource {
                node_name: node.map(Into::into),
                kubeconfig: kubeconfig.map(Into::into),
                in_cluster,
                node_resource_topology_resync_period: resync.map(Into::into),
                ..ConfigSource::default()
            };
            let errors = settings(source).unwrap_err();
            assert_eq!(errors.0[0].key, key, "{node:?} {kubeconfig:?} {resync:?}");
        }
        assert!(is_dns_subdomain(&"a".repeat(253)));
        assert!(!is_dns_subdomain(&"a".repeat(254)));
    }
}

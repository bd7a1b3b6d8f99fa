//! The keys corral reads from a config file, and the warning for one it does not: with the
//! nearest key it does read when the unknown one looks like a misspelling of it
//! ("did you mean").

use std::fmt;

/// Every key [`super::ConfigSource`] reads, as written in a file.
pub(crate) const KNOWN_KEYS: &[&str] = &[
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod",
    "reservedSystemCPUs",
    "kubeReserved",
    "systemReserved",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "containerRuntimeEndpoint",
    "memoryManagerPolicy",
    "reservedMemory",
    "evictionHard",
    "mergeDefaultEvictionSettings",
    "featureGates",
    "root",
    "kubeletLayout",
    "hostRoot",
    "metricsAddress",
    "devicePluginGracePeriod",
    "pluginWaitTimeout",
    "maxContainersPerPod",
    "maxManifestBytes",
    "maxConnectionsPerSocket",
    "maxResourcesPerDevicePlugin",
    "nri",
    "nriSocket",
    "nriPluginIndex",
    "kubeletPodResourcesSocket",
    "nriGuardPinnedCpusets",
    "nriDisconnectedGracePeriod",
    "kubeconfig",
    "nodeName",
    "nodeResourceTopologyResyncPeriod",
];

/// A config-file key corral does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownKey {
    /// The key as written.
    pub(crate) key: String,
    /// The known key it is likely a misspelling of.
    pub(crate) suggestion: Option<&'static str>,
}

impl UnknownKey {
    /// `key`, with the nearest known key when it is close enough.
    pub(crate) fn new(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            suggestion: suggest(key),
        }
    }
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config key {:?} is not read by corral", self.key)?;
        match self.suggestion {
            Some(known) => write!(f, " (did you mean {known:?}?)"),
            None => Ok(()),
        }
    }
}

/// The known key nearest to `key` in edit distance, ignoring case, when at most a third of
/// its letters (and at most 3) differ; the first of equally near ones.
pub(crate) fn suggest(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    let limit = (key.chars().count() / 3).clamp(1, 3);
    KNOWN_KEYS
        .iter()
        .map(|known| (edit_distance(&key, &known.to_ascii_lowercase()), *known))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// Levenshtein distance over chars: insertions, deletions and substitutions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("abc", "acb"), 2);
        assert_eq!(edit_distance("flaw", "lawn"), 2);
    }

    #[test]
    fn misspellings_get_the_key_they_miss() {
        assert_eq!(suggest("cpuManagerPolicyy"), Some("cpuManagerPolicy"));
        assert_eq!(suggest("cpuManagerPolcy"), Some("cpuManagerPolicy"));
        assert_eq!(suggest("reservedSystemCpus"), Some("reservedSystemCPUs"));
        assert_eq!(
            suggest("topologymanagerscope"),
            Some("topologyManagerScope")
        );
        assert_eq!(suggest("nodename"), Some("nodeName"));
        assert_eq!(suggest("nr"), Some("nri"));
        // Keys of other parts of the kubelet are not near any of corral's.
        for other in [
            "address",
            "authentication",
            "clusterDNS",
            "staticPodPath",
            "port",
        ] {
            assert_eq!(suggest(other), None, "{other}");
        }
        let warning = UnknownKey::new("cpuManagerPolicyy").to_string();
        assert_eq!(
            warning,
            r#"config key "cpuManagerPolicyy" is not read by corral (did you mean "cpuManagerPolicy"?)"#
        );
        let warning = UnknownKey::new("clusterDomain").to_string();
        assert_eq!(
            warning,
            r#"config key "clusterDomain" is not read by corral"#
        );
    }

    /// The list is the struct's: each key is read (not left in `other`), and a key off the
    /// list is not.
    #[test]
    fn the_known_keys_are_the_ones_read() {
        for key in KNOWN_KEYS {
            let source: super::super::ConfigSource =
                serde_saphyr::from_str(&format!("{key}: null\n")).unwrap();
            assert!(source.unknown_keys().is_empty(), "{key}");
        }
        let source: super::super::ConfigSource =
            serde_saphyr::from_str("cpuManagerPolicyy: static\n").unwrap();
        assert_eq!(source.unknown_keys(), ["cpuManagerPolicyy"]);
    }
}

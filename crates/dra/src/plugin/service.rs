//! The DRAPlugin gRPC services corral can call, and which one to use for a plugin
//! (upstream `validateSupportedServices`).

use corral_proto::dra::{v1, v1beta1};

use super::error::ServiceError;

/// A DRAPlugin service version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DraService {
    /// `v1.DRAPlugin` (`k8s.io.kubelet.pkg.apis.dra.v1`), the newest.
    V1,
    /// `v1beta1.DRAPlugin`.
    V1Beta1,
}

impl DraService {
    /// Every service corral supports, newest first.
    pub const SUPPORTED: [DraService; 2] = [DraService::V1, DraService::V1Beta1];

    /// The name plugins list in `PluginInfo.supported_versions`.
    pub fn name(self) -> &'static str {
        match self {
            DraService::V1 => v1::DRA_PLUGIN_SERVICE,
            DraService::V1Beta1 => v1beta1::DRA_PLUGIN_SERVICE,
        }
    }

    /// The newest service both sides support.
    ///
    /// Upstream takes the first entry of the plugin's list that the kubelet knows; corral
    /// prefers the newest regardless of the plugin's order, so a plugin listing
    /// `v1beta1.DRAPlugin` first still gets `v1`.
    pub fn choose(supported_versions: &[String]) -> Result<DraService, ServiceError> {
        if supported_versions.is_empty() {
            return Err(ServiceError::NoneListed);
        }
        DraService::SUPPORTED
            .into_iter()
            .find(|s| supported_versions.iter().any(|v| v == s.name()))
            .ok_or_else(|| ServiceError::NoneSupported {
                offered: supported_versions.to_vec(),
                supported: DraService::SUPPORTED.iter().map(|s| s.name()).collect(),
            })
    }
}

/// A DRAResourceHealth service version (KEP-4680), which a plugin may serve beside
/// DRAPlugin and lists in `PluginInfo.supported_versions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HealthService {
    /// `v1.DRAResourceHealth` (k8s 1.37).
    V1,
    /// `v1alpha1.DRAResourceHealth` (k8s 1.31–1.36; the helper of v0.36 advertises it).
    V1Alpha1,
}

impl HealthService {
    /// Every health service corral supports, preferred first.
    pub const SUPPORTED: [HealthService; 2] = [HealthService::V1, HealthService::V1Alpha1];

    /// The name plugins list in `PluginInfo.supported_versions`.
    pub fn name(self) -> &'static str {
        match self {
            HealthService::V1 => corral_proto::dra_health::v1::DRA_RESOURCE_HEALTH_SERVICE,
            HealthService::V1Alpha1 => {
                corral_proto::dra_health::v1alpha1::DRA_RESOURCE_HEALTH_SERVICE
            }
        }
    }

    /// The health service to watch for a plugin listing `supported_versions`: `v1` when
    /// listed, else `v1alpha1`, else none (upstream 1.37 `pickHealthService`). A plugin that
    /// lists none gets no health stream.
    pub fn pick(supported_versions: &[String]) -> Option<HealthService> {
        HealthService::SUPPORTED
            .into_iter()
            .find(|s| supported_versions.iter().any(|v| v == s.name()))
    }
}

impl std::fmt::Display for HealthService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for DraService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    // Upstream TestPickHealthService (1.37, pkg/kubelet/cm/dra/plugin).
    #[test]
    fn pick_health_service() {
        assert_eq!(HealthService::pick(&v(&["v1beta1.DRAPlugin"])), None);
        assert_eq!(HealthService::pick(&[]), None);
        assert_eq!(
            HealthService::pick(&v(&["v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"])),
            Some(HealthService::V1Alpha1)
        );
        assert_eq!(
            HealthService::pick(&v(&["v1beta1.DRAPlugin", "v1.DRAResourceHealth"])),
            Some(HealthService::V1)
        );
        assert_eq!(
            HealthService::pick(&v(&["v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"])),
            Some(HealthService::V1)
        );
    }

    // Upstream TestRegistrationHandler (validation cases): supported lists and their
    // outcome.
    #[test]
    fn choose() {
        assert_eq!(
            DraService::choose(&v(&["v1.DRAPlugin"])),
            Ok(DraService::V1)
        );
        assert_eq!(
            DraService::choose(&v(&["v1beta1.DRAPlugin"])),
            Ok(DraService::V1Beta1)
        );
        assert_eq!(
            DraService::choose(&v(&["v1beta1.DRAPlugin", "v1.DRAPlugin"])),
            Ok(DraService::V1)
        );
        assert_eq!(
            DraService::choose(&v(&["v1alpha4.DRAPlugin", "v1beta1.DRAPlugin"])),
            Ok(DraService::V1Beta1)
        );
        assert_eq!(DraService::choose(&[]), Err(ServiceError::NoneListed));
        let err = DraService::choose(&v(&["1.0.0", "v1alpha3.Node"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("none of services supported by the plugin"),
            "{err}"
        );
    }
}

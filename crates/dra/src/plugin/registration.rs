//! Judging a plugin's `PluginInfo` (upstream: the plugin manager's `RegisterPlugin`
//! operation plus the DRA handler's `ValidatePlugin`): the type must be `DRAPlugin`, the
//! name a valid driver name, a supported service listed, and the endpoint a safe path.

use std::path::{Component, Path, PathBuf};

use corral_proto::pluginregistration::v1::{DRA_PLUGIN, PluginInfo};

use super::error::{DriverNameError, EndpointError, PluginInfoError, RegistrationError};
use super::service::{DraService, HealthService};

/// An accepted plugin: what to register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedPlugin {
    /// The driver name.
    pub driver: String,
    /// The DRAPlugin socket (the registration socket when the plugin gave none).
    pub endpoint: PathBuf,
    /// The service to call.
    pub service: DraService,
    /// The health service to watch, when the plugin lists one.
    pub health: Option<HealthService>,
}

/// Judge `info` read from the registration socket `socket`; the error's
/// [`reason`](RegistrationError::reason) is sent back in `NotifyRegistrationStatus`.
pub fn validate_plugin_info(
    info: &PluginInfo,
    socket: &Path,
) -> Result<AcceptedPlugin, RegistrationError> {
    if info.r#type != DRA_PLUGIN {
        return Err(RegistrationError::UnknownPluginType {
            plugin_type: info.r#type.clone(),
            socket: socket.to_path_buf(),
        });
    }
    let endpoint = if info.endpoint.is_empty() {
        socket.to_path_buf()
    } else {
        PathBuf::from(&info.endpoint)
    };
    let checked = validate_driver_name(&info.name)
        .map_err(PluginInfoError::from)
        .and_then(|()| validate_endpoint(&endpoint).map_err(PluginInfoError::from))
        .and_then(|()| DraService::choose(&info.supported_versions).map_err(PluginInfoError::from));
    match checked {
        Ok(service) => Ok(AcceptedPlugin {
            driver: info.name.clone(),
            endpoint,
            service,
            health: HealthService::pick(&info.supported_versions),
        }),
        Err(source) => Err(RegistrationError::InvalidPlugin {
            driver: info.name.clone(),
            endpoint,
            source,
        }),
    }
}

/// A driver name must be a DNS subdomain (as `DeviceClass` selectors and `ResourceSlice`s
/// require): 1–253 characters of `[a-z0-9.-]`, starting and ending alphanumeric.
/// Upstream only rejects an empty name at call time; corral refuses bad names at
/// registration, since names end up in CDI annotations and logs.
pub fn validate_driver_name(name: &str) -> Result<(), DriverNameError> {
    if name.is_empty() {
        return Err(DriverNameError::Empty);
    }
    let b = name.as_bytes();
    let ok = b.len() <= 253
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(DriverNameError::NotDnsSubdomain(name.to_owned()))
    }
}

/// The endpoint must be an absolute path without `..` (upstream dials whatever path the
/// plugin names).
pub fn validate_endpoint(endpoint: &Path) -> Result<(), EndpointError> {
    if !endpoint.is_absolute() {
        return Err(EndpointError::NotAbsolute(endpoint.to_path_buf()));
    }
    if endpoint.components().any(|c| c == Component::ParentDir) {
        return Err(EndpointError::ParentDir(endpoint.to_path_buf()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(kind: &str, name: &str, endpoint: &str, versions: &[&str]) -> PluginInfo {
        PluginInfo {
            r#type: kind.into(),
            name: name.into(),
            endpoint: endpoint.into(),
            supported_versions: versions.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn verdicts() {
        let sock = Path::new("/var/lib/kubelet/plugins_registry/d-reg.sock");
        let ok = validate_plugin_info(
            &info(
                "DRAPlugin",
                "gpu.example.com",
                "/p/dra.sock",
                &["v1.DRAPlugin"],
            ),
            sock,
        )
        .unwrap();
        assert_eq!(ok.endpoint, Path::new("/p/dra.sock"));
        assert_eq!(ok.service, DraService::V1);
        assert_eq!(ok.health, None);
        let same = validate_plugin_info(&info("DRAPlugin", "d", "", &["v1beta1.DRAPlugin"]), sock)
            .unwrap();
        assert_eq!(same.endpoint, sock);
        let err = validate_plugin_info(&info("CSIPlugin", "d", "", &["v1.DRAPlugin"]), sock)
            .unwrap_err()
            .reason();
        assert!(
            err.contains("no handler registered for plugin type: CSIPlugin"),
            "{err}"
        );
        let err = validate_plugin_info(&info("DRAPlugin", "d", "", &["v9.DRAPlugin"]), sock)
            .unwrap_err()
            .reason();
        assert_eq!(
            err,
            "RegisterPlugin error -- plugin validation failed with err: invalid DRA driver plugin d \
             at endpoint /var/lib/kubelet/plugins_registry/d-reg.sock: invalid supported gRPC \
             versions: none of services supported by the plugin ([\"v9.DRAPlugin\"]) are \
             supported by the kubelet ([\"v1.DRAPlugin\", \"v1beta1.DRAPlugin\"])"
        );
        assert!(validate_plugin_info(&info("DRAPlugin", "", "", &["v1.DRAPlugin"]), sock).is_err());
        assert!(
            validate_plugin_info(&info("DRAPlugin", "Bad/Name", "", &["v1.DRAPlugin"]), sock)
                .is_err()
        );
        assert!(
            validate_plugin_info(&info("DRAPlugin", "d", "rel.sock", &["v1.DRAPlugin"]), sock)
                .is_err()
        );
        assert!(
            validate_plugin_info(
                &info("DRAPlugin", "d", "/a/../b.sock", &["v1.DRAPlugin"]),
                sock
            )
            .is_err()
        );
    }
}

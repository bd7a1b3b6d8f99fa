//! Validation of what a device plugin sends in `Register`: the extended resource name
//! (upstream `v1helper.IsExtendedResourceName`) and the plugin's endpoint, which corral
//! requires to be a plain file name inside the plugin directory.

/// Upstream `IsExtendedResourceName`: the name is not native (it has a `/` and is not in a
/// `*kubernetes.io/` namespace), does not start with `requests.`, and `requests.<name>` is a
/// qualified name.
///
/// ```
/// use corral_devicemgr::is_extended_resource_name;
/// assert!(is_extended_resource_name("nvidia.com/gpu"));
/// assert!(!is_extended_resource_name("gpu"));
/// assert!(!is_extended_resource_name("kubernetes.io/gpu"));
/// assert!(!is_extended_resource_name("example.com/a/b"));
/// ```
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    if native || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}"))
}

/// Upstream `validation.IsQualifiedName`.
fn is_qualified_name(value: &str) -> bool {
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() || !is_dns1123_subdomain(prefix) {
                return false;
            }
            *name
        }
        _ => return false,
    };
    !name.is_empty() && name.len() <= 63 && is_qualified_name_part(name)
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    match bytes {
        [] => false,
        [only] => only.is_ascii_alphanumeric(),
        [first, middle @ .., last] => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && middle.iter().all(inner)
        }
    }
}

/// DNS-1123 subdomain: at most 253 characters, dot-separated labels of lowercase
/// alphanumerics and `-`, each starting and ending alphanumeric.
fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            let ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            match bytes {
                [] => false,
                [only] => ok(only),
                [first, middle @ .., last] => {
                    ok(first) && ok(last) && middle.iter().all(|b| ok(b) || *b == b'-')
                }
            }
        })
}

/// Why a plugin's endpoint name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointNameError {
    /// The endpoint is empty.
    #[error("the endpoint is empty: it must be a socket file name inside the plugin directory")]
    Empty,
    /// The endpoint contains a `/` (an absolute path or a path into another directory).
    #[error(
        "the endpoint {0:?} contains '/': it must be a plain socket file name inside the plugin directory"
    )]
    HasSlash(String),
    /// The endpoint is `.` or `..`.
    #[error(
        "the endpoint {0:?} is not a file name: it must name a socket inside the plugin directory"
    )]
    DotName(String),
    /// The endpoint contains a NUL byte.
    #[error("the endpoint {0:?} contains a NUL byte")]
    Nul(String),
    /// The endpoint is the registration socket itself.
    #[error("the endpoint {0:?} is the kubelet's own registration socket")]
    RegistrationSocket(String),
}

/// Check that a plugin's endpoint is a plain file name: corral never joins a
/// plugin-supplied path onto the plugin directory (upstream's `filepath.Join(dir,
/// endpoint)` follows `..` and absolute paths out of it).
///
/// ```
/// use corral_devicemgr::validate_endpoint_name;
/// assert!(validate_endpoint_name("gpu.sock").is_ok());
/// assert!(validate_endpoint_name("../gpu.sock").is_err());
/// assert!(validate_endpoint_name("/tmp/gpu.sock").is_err());
/// ```
pub fn validate_endpoint_name(endpoint: &str) -> Result<(), EndpointNameError> {
    if endpoint.is_empty() {
        return Err(EndpointNameError::Empty);
    }
    if endpoint.contains('/') {
        return Err(EndpointNameError::HasSlash(endpoint.to_owned()));
    }
    if endpoint == "." || endpoint == ".." {
        return Err(EndpointNameError::DotName(endpoint.to_owned()));
    }
    if endpoint.contains('\0') {
        return Err(EndpointNameError::Nul(endpoint.to_owned()));
    }
    if endpoint == corral_proto::deviceplugin::v1beta1::KUBELET_SOCKET_NAME {
        return Err(EndpointNameError::RegistrationSocket(endpoint.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resource_names() {
        // Upstream TestIsExtendedResourceName (pkg/apis/core/v1/helper) cases.
        for good in ["example.com/dongle", "a/b", "foo.bar/baz-1_2.3", "x.y/Z"] {
            assert!(is_extended_resource_name(good), "{good}");
        }
        for bad in [
            "cpu",
            "kubernetes.io/dongle",
            "foo.kubernetes.io/dongle",
            "requests.example.com/dongle",
            "example.com/",
            "/dongle",
            "Example.com/dongle",
            "example.com/a/b",
            "example.com/-dongle",
            "example_com/dongle",
            "",
        ] {
            assert!(!is_extended_resource_name(bad), "{bad}");
        }
        let long = format!("example.com/{}", "a".repeat(64));
        assert!(!is_extended_resource_name(&long));
        let ok = format!("example.com/{}", "a".repeat(63));
        assert!(is_extended_resource_name(&ok));
    }

    #[test]
    fn endpoint_names() {
        assert!(validate_endpoint_name("a.sock").is_ok());
        assert!(validate_endpoint_name("..a").is_ok());
        for bad in [
            "",
            "/abs.sock",
            "../up.sock",
            "sub/dir.sock",
            ".",
            "..",
            "a\0b",
            "kubelet.sock",
        ] {
            assert!(validate_endpoint_name(bad).is_err(), "{bad:?}");
        }
    }
}

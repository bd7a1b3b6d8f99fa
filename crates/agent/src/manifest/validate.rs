//! The API server's name, identifier and resource rules that matter to the managers, with
//! its messages: corral is its own front door, so a pod the API server would refuse (two
//! containers with one name, a control character in a uid, a request above its limit, huge
//! pages that are no multiple of their page size…) is refused here too.

use std::collections::BTreeMap;

use corral_topology::Quantity;

/// Why the API server refuses a value: its `field.Error` without the field path, in its
/// words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// `field.Required`.
    #[error("Required value")]
    Required,
    /// `field.Invalid`: the value as shown (quoted and escaped) and why.
    #[error("Invalid value: {shown}: {why}")]
    Invalid {
        /// The value, quoted.
        shown: String,
        /// What is wrong with it.
        why: String,
    },
    /// `field.NotSupported` for a pod-level resource name.
    #[error("Unsupported value: {0:?}: supported values: \"cpu\", \"hugepages-\", \"memory\"")]
    UnsupportedPodResource(String),
}

impl Refusal {
    /// `field.Invalid` of `value` (shown as a Rust string literal, as Go's `%q` mostly does).
    fn invalid(value: &str, why: impl std::fmt::Display) -> Refusal {
        Refusal::Invalid {
            shown: format!("{value:?}"),
            why: why.to_string(),
        }
    }
}

/// RFC 1123 label (`metadata.namespace`, container names): at most 63 characters of
/// `[a-z0-9-]`, starting and ending with an alphanumeric character.
pub(crate) fn dns_label(value: &str) -> Result<(), Refusal> {
    const MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
        characters or '-', and must start and end with an alphanumeric character";
    if value.is_empty() {
        return Err(Refusal::Required);
    }
    if value.len() > 63 {
        return Err(Refusal::invalid(
            value,
            "must be no more than 63 characters",
        ));
    }
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let ok = bytes.iter().all(|b| alnum(b) || *b == b'-')
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum);
    if ok {
        Ok(())
    } else {
        Err(Refusal::invalid(value, MESSAGE))
    }
}

/// RFC 1123 subdomain (`metadata.name`): at most 253 characters, dot-separated labels of
/// `[a-z0-9-]` that start and end with an alphanumeric character.
pub(crate) fn dns_subdomain(value: &str) -> Result<(), Refusal> {
    const MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
        alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    if value.is_empty() {
        return Err(Refusal::Required);
    }
    if value.len() > 253 {
        return Err(Refusal::invalid(
            value,
            "must be no more than 253 characters",
        ));
    }
    if is_dns_subdomain(value) {
        Ok(())
    } else {
        Err(Refusal::invalid(value, MESSAGE))
    }
}

/// Dot-separated labels of `[a-z0-9-]` that start and end with an alphanumeric character
/// (the length aside).
fn is_dns_subdomain(value: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    value.split('.').all(|part| {
        let bytes = part.as_bytes();
        bytes.iter().all(|b| alnum(b) || *b == b'-')
            && bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
    })
}

/// `metadata.uid`: the API server writes RFC 4122 uids; corral accepts any printable id of
/// at most 128 bytes (ids from other sources, e.g. a runtime's sandbox), never a control
/// character or NUL, which would corrupt logs and state files.
pub(crate) fn uid(value: &str) -> Result<(), Refusal> {
    if value.len() > 128 {
        return Err(Refusal::invalid(
            &value.escape_debug().to_string(),
            "must be no more than 128 bytes",
        ));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(Refusal::Invalid {
            shown: format!("\"{}\"", value.escape_debug()),
            why: "must not contain control characters".to_owned(),
        });
    }
    Ok(())
}

/// Whose requirements [`resource_requirements`] checks: a container's or the pod's
/// (`spec.resources`), which name different resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// `spec.containers[*].resources`, `spec.initContainers[*].resources`.
    Container,
    /// `spec.resources` (pod-level resources, KEP-2837).
    Pod,
}

/// Upstream `validateResourceRequirements` (v1.36 `pkg/apis/core/validation`) on requests
/// already defaulted from limits, as the API server validates them: every resource name is
/// one the level takes; extended resources are whole numbers; huge pages are a multiple of
/// their page size; a request is at most its limit — equal to it for resources that cannot
/// be overcommitted (huge pages, extended resources), whose request needs a limit; huge
/// pages come with CPU or memory. `path` is the requirements' field path
/// (`spec.containers[0].resources`); the first error found is returned as (field, why) in
/// the API server's words. Quantities are shown as written (upstream shows their canonical
/// form), and compared to a thousandth of a unit.
pub(crate) fn resource_requirements(
    path: &str,
    requests: &BTreeMap<String, String>,
    limits: &BTreeMap<String, String>,
    level: Level,
) -> Result<(), (String, String)> {
    let invalid = |value: &str, why: String| format!("Invalid value: {value:?}: {why}");
    let mut cpu_or_memory = false;
    let mut huge_pages = false;
    for (kind, list) in [("limits", limits), ("requests", requests)] {
        for (name, value) in list {
            // Escaped: the name is checked just below, a control character in it included.
            let field = format!("{path}.{kind}[{}]", name.escape_debug());
            resource_name(name, level).map_err(|why| (field.clone(), why.to_string()))?;
            let quantity = milli(value);
            if is_extended_resource_name(name) && quantity % 1000 != 0 {
                return Err((field, invalid(value, "must be an integer".into())));
            }
            if let Some(page) = name.strip_prefix(HUGE_PAGES_PREFIX) {
                huge_pages = true;
                if !multiple_of_page(value, page) {
                    let why = format!("{value} is not positive integer multiple of {name}");
                    return Err((field, invalid(value, why)));
                }
            }
            cpu_or_memory |= name == "cpu" || name == "memory";
            if kind == "limits" {
                continue;
            }
            match limits.get(name) {
                Some(limit) if !overcommit_allowed(name) && quantity != milli(limit) => {
                    let why = format!("must be equal to {name} limit of {limit}");
                    return Err((format!("{path}.requests"), invalid(value, why)));
                }
                Some(limit) if quantity > milli(limit) => {
                    let why = format!("must be less than or equal to {name} limit of {limit}");
                    return Err((format!("{path}.requests"), invalid(value, why)));
                }
                None if !overcommit_allowed(name) => {
                    return Err((
                        format!("{path}.limits"),
                        "Required value: Limit must be set for non overcommitable resources".into(),
                    ));
                }
                _ => {}
            }
        }
    }
    if huge_pages && !cpu_or_memory {
        return Err((
            path.to_owned(),
            "Forbidden: HugePages require cpu or memory".into(),
        ));
    }
    Ok(())
}

/// Upstream `validatePodResourceConsistency`'s second half: no app container's limit is
/// above the pod's limit of that resource (`pod_limits`, `spec.resources.limits`).
pub(crate) fn container_limits_within_pod_limits<'a>(
    pod_limits: &BTreeMap<String, String>,
    containers: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> Result<(), (String, String)> {
    for (i, limits) in containers.into_iter().enumerate() {
        for (name, value) in limits {
            let Some(pod_limit) = pod_limits.get(name) else {
                continue;
            };
            if milli(value) > milli(pod_limit) {
                return Err((
                    format!("spec.resources.containers[{i}][{name}].limits"),
                    format!(
                        "Invalid value: {value:?}: must be less than or equal to pod limits of {pod_limit}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

const HUGE_PAGES_PREFIX: &str = "hugepages-";

/// Upstream `standardResources` (`helper.IsStandardResourceName`, huge pages aside).
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "quota",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// Upstream `validateContainerResourceName` and `validatePodResourceName`.
fn resource_name(name: &str, level: Level) -> Result<(), Refusal> {
    let invalid = |why: &str| Refusal::invalid(name, why);
    qualified_name(name).map_err(|why| Refusal::invalid(name, why))?;
    let unprefixed = !name.contains('/');
    let standard = |name: &str| {
        STANDARD_RESOURCES.contains(&name)
            || name.starts_with(HUGE_PAGES_PREFIX)
            || name.starts_with("requests.hugepages-")
    };
    if unprefixed && !standard(name) {
        return Err(invalid(
            "must be a standard resource type or fully qualified",
        ));
    }
    match level {
        Level::Container if unprefixed => {
            let container = ["cpu", "memory", "ephemeral-storage"].contains(&name)
                || name.starts_with(HUGE_PAGES_PREFIX);
            if !container {
                return Err(invalid("must be a standard resource for containers"));
            }
        }
        Level::Container => {
            if !is_native_resource(name) && !is_extended_resource_name(name) {
                return Err(invalid("doesn't follow extended resource name standard"));
            }
        }
        Level::Pod => {
            if !(name == "cpu" || name == "memory" || name.starts_with(HUGE_PAGES_PREFIX)) {
                return Err(Refusal::UnsupportedPodResource(name.to_owned()));
            }
        }
    }
    Ok(())
}

/// Upstream `IsNativeResource`: in the `kubernetes.io` domain (or unprefixed).
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Upstream `IsExtendedResourceName`: outside `kubernetes.io`, not a quota `requests.`
/// name, and a qualified name with that prefix.
fn is_extended_resource_name(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && qualified_name(&format!("requests.{name}")).is_ok()
}

/// Upstream `IsOvercommitAllowed`: native and not huge pages.
fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !name.starts_with(HUGE_PAGES_PREFIX)
}

/// Upstream `IsHugePageResourceValueDivisible`: `value` is a whole multiple of the page size
/// the resource name gives (which must be a positive whole number of bytes).
fn multiple_of_page(value: &str, page: &str) -> bool {
    let whole = |text: &str| -> Option<i64> { Quantity::parse(text).ok()?.value().ok() };
    let page_ok = Quantity::parse(page)
        .ok()
        .and_then(|q| q.milli_value().ok())
        .is_some_and(|m| m > 0 && m % 1000 == 0);
    match (page_ok.then(|| whole(page)).flatten(), whole(value)) {
        (Some(page), Some(value)) => value % page == 0,
        _ => false,
    }
}

/// A quantity in thousandths of its unit (a value converted already, so it parses and its
/// whole units fit an `i64`); a value too large for thousandths is taken in whole units.
fn milli(value: &str) -> i128 {
    let Ok(quantity) = Quantity::parse(value) else {
        return 0;
    };
    match quantity.milli_value() {
        Ok(milli) => i128::from(milli),
        Err(_) => quantity.value().map_or(i128::MAX, |v| i128::from(v) * 1000),
    }
}

/// What a qualified name's name part must consist of.
const QUALIFIED_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
    and must start and end with an alphanumeric character";

/// Why a value is no qualified name (upstream `IsQualifiedName`'s messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum QualifiedNameError {
    /// `/name`.
    #[error("prefix part must be non-empty")]
    EmptyPrefix,
    /// A prefix over 253 characters.
    #[error("prefix part must be no more than 253 characters")]
    LongPrefix,
    /// A prefix that is no DNS subdomain.
    #[error(
        "prefix part a lowercase RFC 1123 subdomain must consist of lower \
        case alphanumeric characters, '-' or '.', and must start and end with an \
        alphanumeric character"
    )]
    PrefixNotSubdomain,
    /// More than one `/`.
    #[error(
        "a qualified name {rule}, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        rule = QUALIFIED_NAME_RULE
    )]
    Malformed,
    /// `prefix/`, or nothing.
    #[error("name part must be non-empty")]
    EmptyName,
    /// A name over 63 characters.
    #[error("name part must be no more than 63 characters")]
    LongName,
    /// A name with other characters, or not starting and ending with an alphanumeric one.
    #[error("name part {rule}", rule = QUALIFIED_NAME_RULE)]
    BadName,
}

/// Upstream `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name of at
/// most 63 characters of `[A-Za-z0-9-_.]` that starts and ends with an alphanumeric one.
fn qualified_name(value: &str) -> Result<(), QualifiedNameError> {
    let name = match value.split('/').collect::<Vec<_>>()[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err(QualifiedNameError::EmptyPrefix);
            }
            if prefix.len() > 253 {
                return Err(QualifiedNameError::LongPrefix);
            }
            if !is_dns_subdomain(prefix) {
                return Err(QualifiedNameError::PrefixNotSubdomain);
            }
            name
        }
        _ => return Err(QualifiedNameError::Malformed),
    };
    if name.is_empty() {
        return Err(QualifiedNameError::EmptyName);
    }
    if name.len() > 63 {
        return Err(QualifiedNameError::LongName);
    }
    let bytes = name.as_bytes();
    let ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if ok {
        Ok(())
    } else {
        Err(QualifiedNameError::BadName)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_subdomains_and_uids_follow_the_api_server() {
        for good in ["c", "a-1", "0", &"a".repeat(63)] {
            assert_eq!(dns_label(good), Ok(()), "{good}");
        }
        for bad in ["", "C", "-a", "a-", "a.b", "a_b", &"a".repeat(64), "a\0"] {
            assert!(dns_label(bad).is_err(), "{bad:?}");
        }
        for good in ["a.b", "web-0.x", &"a".repeat(253)] {
            assert_eq!(dns_subdomain(good), Ok(()), "{good}");
        }
        for bad in ["", "a..b", ".a", "A", "a\n", &"a".repeat(254)] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
        assert_eq!(uid("1d0b2a8c-0e4f-4b7a-9c1e-000000000001"), Ok(()));
        let err = uid("a\0b").unwrap_err().to_string();
        assert!(
            err.contains("control characters") && err.contains("a\\0b"),
            "{err}"
        );
        assert!(uid("a\u{7}").is_err() && uid(&"u".repeat(129)).is_err());
    }
}

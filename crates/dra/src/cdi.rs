//! CDI container annotations (`cdi.k8s.io/<driver>_<claim uid>` = comma-separated device
//! ids), the transport for CDI devices to container runtimes that predate the CRI
//! `CDIDevices` field; upstream generated them up to v1.30 (`cdi.go`, copied there from
//! the container-device-interface project). Keys and device ids are validated as there.

/// Prefix of CDI annotation keys.
pub const ANNOTATION_PREFIX: &str = "cdi.k8s.io/";

/// Longest `<driver>_<claim uid>` part of a key.
const MAX_NAME_LEN: usize = 63;

/// The annotation key for a driver's devices of one claim.
pub fn annotation_key(driver: &str, claim_uid: &str) -> Result<String, String> {
    if driver.is_empty() {
        return Err("invalid plugin name, empty".into());
    }
    if claim_uid.is_empty() {
        return Err("invalid deviceID, empty".into());
    }
    let name = format!("{driver}_{}", claim_uid.replace('/', "_"));
    if name.len() > MAX_NAME_LEN {
        return Err(format!("invalid plugin+deviceID {name:?}, too long"));
    }
    let bytes = name.as_bytes();
    let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
    if !first.is_ascii_alphanumeric() {
        return Err(format!(
            "invalid name {name:?}, first '{}' should be alphanumeric",
            first as char
        ));
    }
    if bytes.len() > 2
        && let Some(c) = bytes[1..bytes.len() - 1]
            .iter()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')))
    {
        return Err(format!(
            "invalid name {name:?}, invalid character '{}'",
            *c as char
        ));
    }
    if !last.is_ascii_alphanumeric() {
        return Err(format!(
            "invalid name {name:?}, last '{}' should be alphanumeric",
            last as char
        ));
    }
    Ok(format!("{ANNOTATION_PREFIX}{name}"))
}

/// The annotation value: the device ids, each a qualified CDI name, comma-separated.
pub fn annotation_value(devices: &[String]) -> Result<String, String> {
    for device in devices {
        parse_qualified_name(device)?;
    }
    Ok(devices.join(","))
}

/// Split `vendor/class=name`, validating each part.
pub fn parse_qualified_name(device: &str) -> Result<(&str, &str, &str), String> {
    let unqualified = |what: &str| Err(format!("unqualified device {device:?}, missing {what}"));
    if device.is_empty() || device.starts_with('/') {
        return unqualified("vendor");
    }
    let Some((kind, name)) = device.split_once('=') else {
        return unqualified("vendor");
    };
    if kind.is_empty() || name.is_empty() {
        return unqualified("vendor");
    }
    let Some((vendor, class)) = kind.split_once('/') else {
        return unqualified("vendor");
    };
    if vendor.is_empty() {
        return unqualified("vendor");
    }
    if class.is_empty() {
        return unqualified("class");
    }
    let invalid = |e: String| format!("invalid device {device:?}: {e}");
    check_name("vendor", vendor, true, b"_-.").map_err(invalid)?;
    check_name("class", class, true, b"_-").map_err(invalid)?;
    check_name("device name", name, false, b"_-.:").map_err(invalid)?;
    Ok((vendor, class, name))
}

fn check_name(what: &str, s: &str, letter_first: bool, extra: &[u8]) -> Result<(), String> {
    let b = s.as_bytes();
    let first_ok = if letter_first {
        b[0].is_ascii_alphabetic()
    } else {
        b[0].is_ascii_alphanumeric()
    };
    if !first_ok {
        return Err(format!("invalid {what} {s:?}, bad first character"));
    }
    if b.len() == 1 {
        return Ok(());
    }
    if let Some(c) = b[1..b.len() - 1]
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || extra.contains(c)))
    {
        return Err(format!(
            "invalid character '{}' in {what} {s:?}",
            *c as char
        ));
    }
    if !b[b.len() - 1].is_ascii_alphanumeric() {
        return Err(format!(
            "invalid {what} {s:?}, should end with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(
            annotation_key("gpu.example.com", "0123-abcd").unwrap(),
            "cdi.k8s.io/gpu.example.com_0123-abcd"
        );
        assert_eq!(annotation_key("d", "a/b").unwrap(), "cdi.k8s.io/d_a_b");
        assert!(annotation_key("", "u").is_err());
        assert!(annotation_key("d", "").is_err());
        assert!(annotation_key("-d", "u").is_err());
        assert!(annotation_key("d", "u-").is_err());
        assert!(annotation_key("d!x", "u").is_err());
        assert!(annotation_key(&"d".repeat(60), "uuu").is_err());
    }

    #[test]
    fn values() {
        let ok = vec!["vendor.com/class=dev0".to_owned(), "v/c=a:b".to_owned()];
        assert_eq!(
            annotation_value(&ok).unwrap(),
            "vendor.com/class=dev0,v/c=a:b"
        );
        for bad in [
            "dev0", "/dev/x", "v/=x", "v/c=", "=x", "1v/c=x", "v/c.x=y", "v/c=x-",
        ] {
            assert!(annotation_value(&[bad.to_owned()]).is_err(), "{bad}");
        }
        assert_eq!(annotation_value(&[]).unwrap(), "");
    }
}

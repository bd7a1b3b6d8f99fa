//! CDI container annotations (`cdi.k8s.io/<driver>_<claim uid>` = comma-separated device
//! ids), the transport for CDI devices to container runtimes that predate the CRI
//! `CDIDevices` field; upstream generated them up to v1.30 (`cdi.go`, copied there from
//! the container-device-interface project). Keys and device ids are validated as there,
//! and refused with upstream's messages ([`CdiError`]).

/// Prefix of CDI annotation keys.
pub const ANNOTATION_PREFIX: &str = "cdi.k8s.io/";

/// Longest `<driver>_<claim uid>` part of a key.
const MAX_NAME_LEN: usize = 63;

/// Why a CDI annotation key or device id is refused (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CdiError {
    /// The driver (plugin) name is empty.
    #[error("invalid plugin name, empty")]
    EmptyPluginName,
    /// The claim uid (device id) is empty.
    #[error("invalid deviceID, empty")]
    EmptyDeviceId,
    /// `<driver>_<claim uid>` is longer than 63 characters.
    #[error("invalid plugin+deviceID {0:?}, too long")]
    NameTooLong(String),
    /// `<driver>_<claim uid>` does not start with a letter or digit.
    #[error("invalid name {name:?}, first '{first}' should be alphanumeric")]
    BadFirstCharacter {
        /// `<driver>_<claim uid>`.
        name: String,
        /// Its first character.
        first: char,
    },
    /// `<driver>_<claim uid>` contains a character other than letters, digits, `_-.`.
    #[error("invalid name {name:?}, invalid character '{character}'")]
    InvalidCharacter {
        /// `<driver>_<claim uid>`.
        name: String,
        /// The first invalid character.
        character: char,
    },
    /// `<driver>_<claim uid>` does not end with a letter or digit.
    #[error("invalid name {name:?}, last '{last}' should be alphanumeric")]
    BadLastCharacter {
        /// `<driver>_<claim uid>`.
        name: String,
        /// Its last character.
        last: char,
    },
    /// A device id is not of the form `vendor/class=name`.
    #[error("unqualified device {device:?}, missing {missing}")]
    Unqualified {
        /// The device id.
        device: String,
        /// `vendor` or `class`.
        missing: &'static str,
    },
    /// A part of a qualified device id is invalid.
    #[error("invalid device {device:?}")]
    InvalidDevice {
        /// The device id.
        device: String,
        /// Which part, and what is wrong with it.
        #[source]
        source: CdiNameError,
    },
}

/// What is wrong with one part (vendor, class or device name) of a qualified CDI device id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CdiNameError {
    /// The part does not start with a letter (vendor, class) or a letter or digit (name).
    #[error("invalid {part} {value:?}, bad first character")]
    BadFirstCharacter {
        /// `vendor`, `class` or `device name`.
        part: &'static str,
        /// The part's text.
        value: String,
    },
    /// The part contains a character it may not.
    #[error("invalid character '{character}' in {part} {value:?}")]
    InvalidCharacter {
        /// `vendor`, `class` or `device name`.
        part: &'static str,
        /// The part's text.
        value: String,
        /// The first invalid character.
        character: char,
    },
    /// The part does not end with a letter or digit.
    #[error("invalid {part} {value:?}, should end with a letter or digit")]
    BadLastCharacter {
        /// `vendor`, `class` or `device name`.
        part: &'static str,
        /// The part's text.
        value: String,
    },
}

/// The annotation key for a driver's devices of one claim.
pub fn annotation_key(driver: &str, claim_uid: &str) -> Result<String, CdiError> {
    if driver.is_empty() {
        return Err(CdiError::EmptyPluginName);
    }
    if claim_uid.is_empty() {
        return Err(CdiError::EmptyDeviceId);
    }
    let name = format!("{driver}_{}", claim_uid.replace('/', "_"));
    if name.len() > MAX_NAME_LEN {
        return Err(CdiError::NameTooLong(name));
    }
    let bytes = name.as_bytes();
    let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
    if !first.is_ascii_alphanumeric() {
        return Err(CdiError::BadFirstCharacter {
            first: first as char,
            name,
        });
    }
    if bytes.len() > 2
        && let Some(&c) = bytes[1..bytes.len() - 1]
            .iter()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')))
    {
        return Err(CdiError::InvalidCharacter {
            character: c as char,
            name,
        });
    }
    if !last.is_ascii_alphanumeric() {
        return Err(CdiError::BadLastCharacter {
            last: last as char,
            name,
        });
    }
    Ok(format!("{ANNOTATION_PREFIX}{name}"))
}

/// The annotation value: the device ids, each a qualified CDI name, comma-separated.
pub fn annotation_value(devices: &[String]) -> Result<String, CdiError> {
    for device in devices {
        parse_qualified_name(device)?;
    }
    Ok(devices.join(","))
}

/// Split `vendor/class=name`, validating each part.
pub fn parse_qualified_name(device: &str) -> Result<(&str, &str, &str), CdiError> {
    let unqualified = |missing| {
        Err(CdiError::Unqualified {
            device: device.to_owned(),
            missing,
        })
    };
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
    let invalid = |source| CdiError::InvalidDevice {
        device: device.to_owned(),
        source,
    };
    check_name("vendor", vendor, FirstCharacter::Letter, b"_-.").map_err(invalid)?;
    check_name("class", class, FirstCharacter::Letter, b"_-").map_err(invalid)?;
    check_name("device name", name, FirstCharacter::Alphanumeric, b"_-.:").map_err(invalid)?;
    Ok((vendor, class, name))
}

/// What a part of a qualified device id may start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FirstCharacter {
    Letter,
    Alphanumeric,
}

fn check_name(
    part: &'static str,
    s: &str,
    first: FirstCharacter,
    extra: &[u8],
) -> Result<(), CdiNameError> {
    let b = s.as_bytes();
    let first_ok = match first {
        FirstCharacter::Letter => b[0].is_ascii_alphabetic(),
        FirstCharacter::Alphanumeric => b[0].is_ascii_alphanumeric(),
    };
    if !first_ok {
        return Err(CdiNameError::BadFirstCharacter {
            part,
            value: s.to_owned(),
        });
    }
    if b.len() == 1 {
        return Ok(());
    }
    if let Some(&c) = b[1..b.len() - 1]
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || extra.contains(c)))
    {
        return Err(CdiNameError::InvalidCharacter {
            part,
            value: s.to_owned(),
            character: c as char,
        });
    }
    if !b[b.len() - 1].is_ascii_alphanumeric() {
        return Err(CdiNameError::BadLastCharacter {
            part,
            value: s.to_owned(),
        });
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

    // Upstream's texts, typed; a part's error is the device error's source, not repeated.
    #[test]
    fn typed_errors_with_upstream_messages() {
        assert_eq!(annotation_key("", "u"), Err(CdiError::EmptyPluginName));
        assert_eq!(annotation_key("d", ""), Err(CdiError::EmptyDeviceId));
        let cases = [
            (
                annotation_key("-d", "u"),
                r#"invalid name "-d_u", first '-' should be alphanumeric"#,
            ),
            (
                annotation_key("d", "u-"),
                r#"invalid name "d_u-", last '-' should be alphanumeric"#,
            ),
            (
                annotation_key("d!x", "u"),
                r#"invalid name "d!x_u", invalid character '!'"#,
            ),
            (
                annotation_value(&["dev0".into()]),
                r#"unqualified device "dev0", missing vendor"#,
            ),
            (
                annotation_value(&["v/=x".into()]),
                r#"unqualified device "v/=x", missing class"#,
            ),
        ];
        for (result, text) in cases {
            assert_eq!(result.unwrap_err().to_string(), text);
        }
        let err = parse_qualified_name("v/c=x-").unwrap_err();
        assert_eq!(err.to_string(), r#"invalid device "v/c=x-""#);
        let source = std::error::Error::source(&err)
            .expect("the part's error")
            .to_string();
        assert_eq!(
            source,
            r#"invalid device name "x-", should end with a letter or digit"#
        );
    }
}

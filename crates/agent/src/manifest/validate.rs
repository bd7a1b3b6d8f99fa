//! The API server's name and identifier rules that matter to the managers, with its
//! messages: corral is its own front door, so a pod the API server would refuse (two
//! containers with one name, a control character in a uid…) is refused here too.

/// RFC 1123 label (`metadata.namespace`, container names): at most 63 characters of
/// `[a-z0-9-]`, starting and ending with an alphanumeric character.
pub(crate) fn dns_label(value: &str) -> Result<(), String> {
    const MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
        characters or '-', and must start and end with an alphanumeric character";
    if value.is_empty() {
        return Err("Required value".to_owned());
    }
    if value.len() > 63 {
        return Err(format!(
            "Invalid value: {value:?}: must be no more than 63 characters"
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
        Err(format!("Invalid value: {value:?}: {MESSAGE}"))
    }
}

/// RFC 1123 subdomain (`metadata.name`): at most 253 characters, dot-separated labels of
/// `[a-z0-9-]` that start and end with an alphanumeric character.
pub(crate) fn dns_subdomain(value: &str) -> Result<(), String> {
    const MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
        alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    if value.is_empty() {
        return Err("Required value".to_owned());
    }
    if value.len() > 253 {
        return Err(format!(
            "Invalid value: {value:?}: must be no more than 253 characters"
        ));
    }
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let ok = value.split('.').all(|part| {
        let bytes = part.as_bytes();
        bytes.iter().all(|b| alnum(b) || *b == b'-')
            && bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
    });
    if ok {
        Ok(())
    } else {
        Err(format!("Invalid value: {value:?}: {MESSAGE}"))
    }
}

/// `metadata.uid`: the API server writes RFC 4122 uids; corral accepts any printable id of
/// at most 128 bytes (ids from other sources, e.g. a runtime's sandbox), never a control
/// character or NUL, which would corrupt logs and state files.
pub(crate) fn uid(value: &str) -> Result<(), String> {
    if value.len() > 128 {
        return Err(format!(
            "Invalid value: {:?}: must be no more than 128 bytes",
            value.escape_debug().to_string()
        ));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(format!(
            "Invalid value: \"{}\": must not contain control characters",
            value.escape_debug()
        ));
    }
    Ok(())
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
        let err = uid("a\0b").unwrap_err();
        assert!(
            err.contains("control characters") && err.contains("a\\0b"),
            "{err}"
        );
        assert!(uid("a\u{7}").is_err() && uid(&"u".repeat(129)).is_err());
    }
}

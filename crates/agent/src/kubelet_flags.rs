//! The kubelet's flag value syntaxes corral's command line shares, read as the kubelet's own
//! `pflag.Value`s read them (their accepted forms and error messages): `--feature-gates`
//! (`k8s.io/component-base/cli/flag.MapStringBool`) and `--reserved-memory`
//! (`k8s.io/kubernetes/pkg/util/flag.ReservedMemoryVar`). `KEY=VALUE` maps are
//! [`crate::cli::parse_key_values`].

use std::collections::BTreeMap;

use corral_topology::Quantity;

/// The gates of one `--feature-gates` value, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GateValues(pub(crate) Vec<(String, bool)>);

/// Why a `--feature-gates` value does not parse (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GateValueError {
    /// A piece without `=`.
    #[error("malformed pair, expect string=bool")]
    MalformedPair,
    /// A value Go's `strconv.ParseBool` refuses.
    #[error(
        "invalid value of {key}: {value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    NotABool {
        /// The gate.
        key: String,
        /// The value as given (trimmed).
        value: String,
    },
}

/// Go's `strconv.ParseBool`: `1 t T TRUE true True`, `0 f F FALSE false False`.
fn go_parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// One `--feature-gates` value as `MapStringBool.Set` reads it: pairs separated by commas,
/// empty pieces skipped, each split at its first `=`, key and value trimmed, the value a Go
/// bool. Over several occurrences the later value of a gate wins.
pub(crate) fn parse_feature_gates(text: &str) -> Result<GateValues, GateValueError> {
    text.split(',')
        .filter(|piece| !piece.is_empty())
        .map(|piece| {
            let (key, value) = piece.split_once('=').ok_or(GateValueError::MalformedPair)?;
            let (key, value) = (key.trim(), value.trim());
            go_parse_bool(value)
                .map(|on| (key.to_owned(), on))
                .ok_or_else(|| GateValueError::NotABool {
                    key: key.to_owned(),
                    value: value.to_owned(),
                })
        })
        .collect::<Result<_, _>>()
        .map(GateValues)
}

/// One NUMA node's part of a `--reserved-memory` value (a `reservedMemory` entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeReservation {
    /// The NUMA node id.
    pub(crate) numa_node: i32,
    /// Resource (`memory`, `hugepages-<size>`) → quantity, as written.
    pub(crate) limits: BTreeMap<String, String>,
}

/// The NUMA nodes' reservations of one `--reserved-memory` value, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReservedMemoryValues(pub(crate) Vec<NodeReservation>);

/// Why a `--reserved-memory` value does not parse (upstream's messages, their spelling kept
/// so that a search for them finds both).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReservedMemoryError {
    /// A node's part is not `ID:LIMITS`.
    #[error(
        "the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got {0}"
    )]
    Format(String),
    /// The node id is not an integer.
    #[error("failed to convert the NUMA node ID, exptected integer, got {0}")]
    NodeId(String),
    /// A limit is not `TYPE=QUANTITY`.
    #[error("the reserved limit has incorrect value, expected type=quantatity, got {0}")]
    Limit(String),
    /// A limit of something other than memory or huge pages.
    #[error("memory type conversion error, unknown type: {0:?}")]
    Type(String),
    /// A quantity that does not parse.
    #[error("failed to parse the quantatity, expected quantatity, got {0}")]
    Quantity(String),
}

/// One `--reserved-memory` value as `ReservedMemoryVar.Set` reads it (v1.36):
/// `0:memory=1Gi,hugepages-2Mi=2Mi;1:memory=1Gi`: nodes separated by `;`, each
/// `ID:TYPE=QUANTITY[,TYPE=QUANTITY...]`, TYPE `memory` or `hugepages-<size>`. Nothing is
/// trimmed or skipped. Several occurrences add their nodes (the flag accumulates).
pub(crate) fn parse_reserved_memory(
    text: &str,
) -> Result<ReservedMemoryValues, ReservedMemoryError> {
    if text.is_empty() {
        return Ok(ReservedMemoryValues::default());
    }
    let mut entries = Vec::new();
    for node in text.split(';') {
        let parts: Vec<&str> = node.split(':').collect();
        let [id, limits] = parts[..] else {
            return Err(ReservedMemoryError::Format(node.to_owned()));
        };
        let numa_node = id
            .parse::<i64>()
            .ok()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| ReservedMemoryError::NodeId(id.to_owned()))?;
        let mut map = BTreeMap::new();
        for limit in limits.split(',') {
            let pair: Vec<&str> = limit.split('=').collect();
            let [resource, quantity] = pair[..] else {
                return Err(ReservedMemoryError::Limit(limit.to_owned()));
            };
            if resource != "memory" && !resource.starts_with("hugepages-") {
                return Err(ReservedMemoryError::Type(resource.to_owned()));
            }
            Quantity::parse(quantity)
                .map_err(|_| ReservedMemoryError::Quantity(quantity.to_owned()))?;
            map.insert(resource.to_owned(), quantity.to_owned());
        }
        entries.push(NodeReservation {
            numa_node,
            limits: map,
        });
    }
    Ok(ReservedMemoryValues(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TestSetMapStringBool` (k8s.io/component-base/cli/flag/map_string_bool_test.go).
    #[test]
    fn feature_gates_read_as_map_string_bool() {
        let gates = |text: &str| parse_feature_gates(text).map(|g| g.0);
        let pair = |k: &str, v: bool| (k.to_owned(), v);
        assert_eq!(gates(""), Ok(vec![]));
        assert_eq!(gates("one=true"), Ok(vec![pair("one", true)]));
        assert_eq!(
            gates("one=true,two=false"),
            Ok(vec![pair("one", true), pair("two", false)])
        );
        assert_eq!(
            gates("one=true, two=false"),
            Ok(vec![pair("one", true), pair("two", false)])
        );
        assert_eq!(gates("=true"), Ok(vec![pair("", true)]));
        assert_eq!(
            gates("a=1,b=T,c=FALSE,d=f,,"),
            Ok(vec![
                pair("a", true),
                pair("b", true),
                pair("c", false),
                pair("d", false)
            ])
        );
        let err = |text: &str| parse_feature_gates(text).unwrap_err().to_string();
        assert_eq!(err("one"), "malformed pair, expect string=bool");
        assert_eq!(
            err("one=foo"),
            r#"invalid value of one: foo, err: strconv.ParseBool: parsing "foo": invalid syntax"#
        );
        // Go's ParseBool is case-sensitive beyond its three spellings.
        assert!(parse_feature_gates("one=yes").is_err());
        assert!(parse_feature_gates("one=tRUE").is_err());
    }

    fn entry(node: i32, limits: &[(&str, &str)]) -> NodeReservation {
        NodeReservation {
            numa_node: node,
            limits: limits
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    /// `TestReservedMemoryVar` (k8s.io/kubernetes/pkg/util/flag/flags_test.go): its valid
    /// and invalid inputs, and the message of each refusal.
    #[test]
    fn reserved_memory_reads_as_the_kubelets_flag() {
        let parse = |text: &str| parse_reserved_memory(text).map(|v| v.0);
        assert_eq!(
            parse("0:memory=1Gi"),
            Ok(vec![entry(0, &[("memory", "1Gi")])])
        );
        assert_eq!(
            parse("0:memory=1Gi,hugepages-1Gi=1Gi"),
            Ok(vec![entry(
                0,
                &[("memory", "1Gi"), ("hugepages-1Gi", "1Gi")]
            )])
        );
        assert_eq!(
            parse("0:memory=1Gi,hugepages-1Gi=1Gi;1:memory=1Gi"),
            Ok(vec![
                entry(0, &[("memory", "1Gi"), ("hugepages-1Gi", "1Gi")]),
                entry(1, &[("memory", "1Gi")])
            ])
        );
        assert_eq!(parse(""), Ok(vec![]));
        let err = |text: &str| parse_reserved_memory(text).unwrap_err().to_string();
        assert_eq!(
            err("bad-input"),
            "the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got bad-input"
        );
        assert_eq!(
            err("0:"),
            "the reserved limit has incorrect value, expected type=quantatity, got "
        );
        assert_eq!(
            err("a:memory=1Gi"),
            "failed to convert the NUMA node ID, exptected integer, got a"
        );
        assert_eq!(
            err("0:memory="),
            "failed to parse the quantatity, expected quantatity, got "
        );
        assert_eq!(
            err("0:type=1Gi"),
            r#"memory type conversion error, unknown type: "type""#
        );
        assert_eq!(
            err("0:memory=1Be"),
            "failed to parse the quantatity, expected quantatity, got 1Be"
        );
        // A trailing `;` is an empty node: refused, as upstream (nothing is skipped).
        assert!(err("0:memory=1Gi;").contains("incorrect format, expected"));
        assert!(err("0:memory=1Gi=2").contains("expected type=quantatity, got memory=1Gi=2"));
    }
}

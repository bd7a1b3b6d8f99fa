//! The NodeResourceTopology object as the API server stores it: `topology.node.k8s.io/v1alpha2`,
//! cluster-scoped, one per node and named after it. The field names and their JSON spellings are
//! those of `k8stopologyawareschedwg/noderesourcetopology-api` (`pkg/apis/topology/v1alpha2/types.go`),
//! so an object written here is read unchanged by the scheduler plugin `NodeResourceTopologyMatch`
//! and by the exporters (resource-topology-exporter, nfd-topology-updater).

use serde::{Deserialize, Serialize};

/// The API group of NodeResourceTopology.
pub const GROUP: &str = "topology.node.k8s.io";
/// The version corral writes (the CRD's storage version).
pub const VERSION: &str = "v1alpha2";
/// `apiVersion` of the objects corral writes.
pub const API_VERSION: &str = "topology.node.k8s.io/v1alpha2";
/// `kind` of the objects.
pub const KIND: &str = "NodeResourceTopology";
/// The resource's plural, as in the REST path `/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies`.
pub const PLURAL: &str = "noderesourcetopologies";
/// The type of a zone that is one NUMA node, as the exporters and the scheduler plugin spell it.
pub const ZONE_TYPE_NODE: &str = "Node";

/// The top-level attribute naming the topology manager's policy (`single-numa-node`, …).
pub const ATTRIBUTE_POLICY: &str = "topologyManagerPolicy";
/// The top-level attribute naming the topology manager's scope (`container` or `pod`).
pub const ATTRIBUTE_SCOPE: &str = "topologyManagerScope";
/// The top-level attribute carrying the pod fingerprint.
pub const ATTRIBUTE_FINGERPRINT: &str = "nodeTopologyPodsFingerprint";
/// The top-level attribute naming which pods the fingerprint covers.
pub const ATTRIBUTE_FINGERPRINT_METHOD: &str = "nodeTopologyPodsFingerprintMethod";

/// A NodeResourceTopology: the node's NUMA zones with what each has, can give and has free.
///
/// # Example
///
/// ```
/// use corral_nrt::{NodeResourceTopology, Zone, ResourceInfo, API_VERSION};
///
/// let mut nrt = NodeResourceTopology::named("worker-1");
/// nrt.zones.push(Zone::numa_node(0));
/// nrt.zones[0].resources.push(ResourceInfo::new("cpu", 8, 6, 2));
/// let json = serde_json::to_value(&nrt).unwrap();
/// assert_eq!(json["apiVersion"], API_VERSION);
/// assert_eq!(json["zones"][0]["name"], "node-0");
/// assert_eq!(json["zones"][0]["resources"][0]["available"], "2");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourceTopology {
    /// Always [`API_VERSION`] for objects corral writes.
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// The name (the node's) and, when read from a server, its `resourceVersion`.
    pub metadata: ObjectMeta,
    /// Deprecated upstream in favour of the top-level attributes; written with the one value
    /// that names policy and scope together (`SingleNUMANodeContainerLevel`, …), as the
    /// exporters still do, since the field is required by the CRD's schema.
    #[serde(default)]
    pub topology_policies: Vec<String>,
    /// One zone per NUMA node.
    #[serde(default)]
    pub zones: Vec<Zone>,
    /// Node-wide attributes: policy, scope, the pod fingerprint and its method.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeInfo>,
}

impl NodeResourceTopology {
    /// An empty object for node `name`, with `apiVersion` and `kind` set.
    pub fn named(name: &str) -> Self {
        Self {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            metadata: ObjectMeta {
                name: name.to_owned(),
                resource_version: None,
            },
            ..Self::default()
        }
    }

    /// The value of the top-level attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        find_attribute(&self.attributes, name)
    }

    /// The zone called `name` (`node-0`, …).
    pub fn zone(&self, name: &str) -> Option<&Zone> {
        self.zones.iter().find(|z| z.name == name)
    }

    /// Whether `other` says the same as `self`, whatever the server added to its metadata.
    pub fn same_content(&self, other: &Self) -> bool {
        self.topology_policies == other.topology_policies
            && self.zones == other.zones
            && self.attributes == other.attributes
    }
}

/// The part of Kubernetes' `ObjectMeta` corral reads and writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The node's name.
    #[serde(default)]
    pub name: String,
    /// The server's version of the object; sent back on update for optimistic concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// A topology zone; corral writes one of type [`ZONE_TYPE_NODE`] per NUMA node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Zone {
    /// `node-<id>`, the NUMA node's id as sysfs numbers it.
    pub name: String,
    /// [`ZONE_TYPE_NODE`].
    #[serde(rename = "type")]
    pub zone_type: String,
    /// The enclosing zone; unused for NUMA nodes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent: String,
    /// The distance to every NUMA node (`node-<id>` → the SLIT value), this one included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub costs: Vec<CostInfo>,
    /// Zone attributes; corral writes none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeInfo>,
    /// What the zone has, can give and has free, per resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceInfo>,
}

impl Zone {
    /// An empty zone of type `Node` for NUMA node `id`.
    pub fn numa_node(id: usize) -> Self {
        Self {
            name: numa_zone_name(id),
            zone_type: ZONE_TYPE_NODE.to_owned(),
            ..Self::default()
        }
    }

    /// The entry for resource `name`.
    pub fn resource(&self, name: &str) -> Option<&ResourceInfo> {
        self.resources.iter().find(|r| r.name == name)
    }
}

/// `node-<id>`: the zone name of NUMA node `id`.
pub fn numa_zone_name(id: usize) -> String {
    format!("node-{id}")
}

/// The NUMA node id of a zone called `node-<id>`.
pub fn numa_id_of_zone(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("node-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One resource of a zone, as Kubernetes quantities (corral writes plain integers: CPUs, bytes,
/// devices).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceInfo {
    /// `cpu`, `memory`, `hugepages-2Mi`, a device resource such as `example.com/gpu`.
    pub name: String,
    /// What the zone has.
    pub capacity: Quantity,
    /// What pods may be given: capacity less what the node reserves.
    pub allocatable: Quantity,
    /// What is free for pods still to come: allocatable less what admitted pods hold.
    pub available: Quantity,
}

impl ResourceInfo {
    /// An entry with integer quantities.
    pub fn new(name: &str, capacity: u64, allocatable: u64, available: u64) -> Self {
        Self {
            name: name.to_owned(),
            capacity: Quantity::from(capacity),
            allocatable: Quantity::from(allocatable),
            available: Quantity::from(available),
        }
    }
}

/// A Kubernetes quantity as it travels: a string (`"4"`, `"2Gi"`, `"500m"`) or, since the CRD
/// allows int-or-string, a JSON integer on read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Quantity(pub String);

impl From<u64> for Quantity {
    fn from(value: u64) -> Self {
        Quantity(value.to_string())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum IntOrString {
            Int(i64),
            String(String),
        }
        Ok(match IntOrString::deserialize(de)? {
            IntOrString::Int(i) => Quantity(i.to_string()),
            IntOrString::String(s) => Quantity(s),
        })
    }
}

/// The cost (distance) from a zone to the zone `name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostInfo {
    /// The other zone.
    pub name: String,
    /// The distance, as the SLIT gives it (10 to itself).
    pub value: i64,
}

/// A named attribute of a zone or of the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeInfo {
    /// The attribute's name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl AttributeInfo {
    /// An attribute.
    pub fn new(name: &str, value: &str) -> Self {
        Self {
            name: name.to_owned(),
            value: value.to_owned(),
        }
    }
}

/// The value of attribute `name` in `attributes`.
pub fn find_attribute<'a>(attributes: &'a [AttributeInfo], name: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exporter_written_object_reads_and_writes_back_the_same() {
        // The shape resource-topology-exporter publishes (quantities as strings and as
        // integers, as the CRD's int-or-string allows).
        let text = r#"{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology",
            "metadata":{"name":"n1","resourceVersion":"42","uid":"x"},
            "topologyPolicies":["SingleNUMANodeContainerLevel"],
            "zones":[{"name":"node-0","type":"Node","costs":[{"name":"node-0","value":10},{"name":"node-1","value":21}],
              "resources":[{"name":"cpu","capacity":"8","allocatable":7,"available":"3"}]}],
            "attributes":[{"name":"topologyManagerPolicy","value":"single-numa-node"}]}"#;
        let nrt: NodeResourceTopology = serde_json::from_str(text).unwrap();
        assert_eq!(nrt.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(nrt.attribute(ATTRIBUTE_POLICY), Some("single-numa-node"));
        let cpu = nrt.zone("node-0").unwrap().resource("cpu").unwrap();
        assert_eq!(cpu.allocatable, Quantity("7".into()));
        let again: NodeResourceTopology =
            serde_json::from_value(serde_json::to_value(&nrt).unwrap()).unwrap();
        assert_eq!(again, nrt);
    }

    #[test]
    fn zone_names_map_to_numa_ids_and_back() {
        assert_eq!(numa_zone_name(3), "node-3");
        assert_eq!(numa_id_of_zone("node-3"), Some(3));
        for bad in ["node-", "node-x", "node--1", "socket-0", "node-+1"] {
            assert_eq!(numa_id_of_zone(bad), None, "{bad}");
        }
    }
}

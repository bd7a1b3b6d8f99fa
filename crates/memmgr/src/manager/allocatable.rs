//! The node allocatable reservation of memory and huge pages, as upstream's
//! `GetNodeAllocatableReservation` computes it from `systemReserved`, `kubeReserved` and
//! the hard eviction threshold `memory.available` (`hardEvictionReservation`): what the
//! `reservedMemory` entries must add up to.

use std::collections::BTreeMap;

use corral_topology::{Quantity, QuantityError, QuantityFormat, QuantitySum};

use super::config::is_memory_resource;
use crate::machine_state::MEMORY;

/// An eviction threshold's value (`evictionHard`'s `memory.available`).
#[derive(Debug, Clone, PartialEq)]
pub enum EvictionThreshold {
    /// A quantity, e.g. `100Mi`.
    Quantity(Quantity),
    /// A share of the node's memory capacity, e.g. `10%` as `0.1` (upstream keeps it as a
    /// `float32`).
    Percentage(f32),
}

impl EvictionThreshold {
    /// Upstream `ParseThresholdConfig`'s reading of a value: `"<n>%"` is a percentage
    /// (parsed as a `float32`, then divided by 100), anything else a quantity above zero;
    /// `"0%"` and `"100%"` set no threshold (`None`), as upstream ignores them. Unlike
    /// upstream (whose check compares the fraction with 100), a percentage above 100 is an
    /// error.
    pub fn parse(text: &str) -> Result<Option<EvictionThreshold>, QuantityError> {
        let invalid = || QuantityError::Format(text.to_owned());
        match text.strip_suffix('%') {
            Some(_) if text == "0%" || text == "100%" => Ok(None),
            Some(number) => {
                let value: f32 = number.parse().map_err(|_| invalid())?;
                if !(0.0..=100.0).contains(&value) {
                    return Err(invalid());
                }
                Ok(Some(EvictionThreshold::Percentage(value / 100.0)))
            }
            None => {
                let quantity = Quantity::parse(text)?;
                if quantity.is_negative() || quantity.value()? == 0 {
                    return Err(invalid());
                }
                Ok(Some(EvictionThreshold::Quantity(quantity)))
            }
        }
    }

    /// Upstream `GetThresholdQuantity`: the quantity, or the percentage of `capacity`
    /// bytes (truncated, binary SI).
    fn reservation(&self, capacity: u64) -> Result<QuantitySum, QuantityError> {
        match self {
            EvictionThreshold::Quantity(q) => Ok(QuantitySum::of(q.value()?, q.format())),
            EvictionThreshold::Percentage(p) => Ok(QuantitySum::of(
                (capacity as f64 * f64::from(*p)) as i64,
                QuantityFormat::BinarySi,
            )),
        }
    }
}

/// What the node keeps of each resource the memory manager splits per node (upstream
/// `GetNodeAllocatableReservation`, restricted to `resources`, the machine's `memory` and
/// huge page sizes): `system` + `kube` + (for `memory`) the hard eviction threshold of
/// `memory_capacity` bytes, each sum built as upstream's `Quantity.Add` builds it; zero
/// sums are left out.
pub fn node_allocatable_reservation<'a>(
    resources: impl IntoIterator<Item = &'a str>,
    system: &BTreeMap<String, Quantity>,
    kube: &BTreeMap<String, Quantity>,
    eviction: Option<&EvictionThreshold>,
    memory_capacity: u64,
) -> Result<BTreeMap<String, QuantitySum>, QuantityError> {
    let mut out = BTreeMap::new();
    for resource in resources.into_iter().filter(|r| is_memory_resource(r)) {
        let mut sum = QuantitySum::new(Some(QuantityFormat::DecimalSi));
        for part in [system.get(resource), kube.get(resource)] {
            match part {
                Some(q) => sum.add(q)?,
                // A missing entry adds Go's zero `Quantity` (no format).
                None => sum.add_sum(QuantitySum::new(None)).unwrap_or(()),
            }
        }
        match eviction.filter(|_| resource == MEMORY) {
            Some(threshold) => {
                let part = threshold.reservation(memory_capacity)?;
                sum.add_sum(part).ok_or_else(|| QuantityError::Overflow {
                    quantity: "evictionHard memory.available".to_owned(),
                    unit: "value",
                })?;
            }
            None => sum.add_sum(QuantitySum::new(None)).unwrap_or(()),
        }
        if sum.value() != 0 {
            out.insert(resource.to_owned(), sum);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
            .collect()
    }

    #[test]
    fn sums_system_kube_and_eviction_as_upstream_prints_them() {
        let system = quantities(&[("memory", "500Mi"), ("hugepages-2Mi", "4Mi")]);
        let kube = quantities(&[("memory", "400Mi"), ("cpu", "1")]);
        let eviction = EvictionThreshold::parse("100Mi").unwrap().unwrap();
        let got = node_allocatable_reservation(
            ["memory", "hugepages-2Mi", "hugepages-1Gi", "cpu"],
            &system,
            &kube,
            Some(&eviction),
            8 << 30,
        )
        .unwrap();
        let printed: Vec<(String, String)> = got
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        assert_eq!(
            printed,
            [
                ("hugepages-2Mi".to_owned(), "4Mi".to_owned()),
                ("memory".to_owned(), "1000Mi".to_owned())
            ]
        );
    }

    #[test]
    fn a_percentage_is_of_the_capacity_truncated() {
        // Upstream's values (float32 percentages): 10% of 10Gi is 1073741840 bytes, 7.5% of
        // 16Gi 1288490240, 99.9% of 16Gi prints 16760439Ki.
        for (threshold, capacity, bytes, printed) in [
            ("10%", 10u64 << 30, 1073741840, "1073741840"),
            ("5%", 10 << 30, 536870920, "536870920"),
            ("1%", 1000000007, 9999999, "9999999"),
            ("7.5%", 16 << 30, 1288490240, "1288490240"),
            ("99.9%", 16 << 30, 17162689536, "16760439Ki"),
        ] {
            let eviction = EvictionThreshold::parse(threshold).unwrap().unwrap();
            let got = node_allocatable_reservation(
                ["memory"],
                &BTreeMap::new(),
                &BTreeMap::new(),
                Some(&eviction),
                capacity,
            )
            .unwrap();
            assert_eq!(got["memory"].value(), bytes, "{threshold}");
            assert_eq!(got["memory"].to_string(), printed, "{threshold}");
        }
        assert_eq!(EvictionThreshold::parse("0%"), Ok(None));
        assert_eq!(EvictionThreshold::parse("100%"), Ok(None));
        for bad in ["101%", "x%", "0", "-1Mi", "lots"] {
            assert!(EvictionThreshold::parse(bad).is_err(), "{bad}");
        }
    }
}

//! How upstream prints a quantity (`resource.Quantity.String()`, `CanonicalizeBytes`) and
//! how `Quantity.Add` picks the format of a sum, for whole values — what error messages
//! that print sums of byte quantities (the memory manager's reservation check) need to
//! match upstream's text.
//!
//! - A parsed quantity's format comes from its suffix: `Ki`…`Ei` binary SI, `e<n>`
//!   decimal exponent, anything else (none included) decimal SI.
//! - A sum starts from a format and takes the format of each value added while it is zero.
//! - Printing: `0` is `"0"`; binary SI prints the value over the largest power of 1024 that
//!   divides it (`1536Mi`), unless it lies strictly between -1024 and 1024 (then decimal
//!   SI); decimal SI and decimal exponent print the value with trailing zeros taken off in
//!   groups of three (`2k`, `1500`, or `2e3`). A sum of no format (Go's zero `Quantity`)
//!   prints as a decimal exponent.

use std::fmt;

use crate::quantity::{Quantity, QuantityError};

/// Upstream `resource.Format`.
///
/// # Example
///
/// ```
/// use corral_topology::{Quantity, QuantityFormat};
///
/// assert_eq!(Quantity::parse("1Gi")?.format(), QuantityFormat::BinarySi);
/// assert_eq!(Quantity::parse("1e3")?.format(), QuantityFormat::DecimalExponent);
/// assert_eq!(Quantity::parse("500m")?.format(), QuantityFormat::DecimalSi);
/// # Ok::<(), corral_topology::QuantityError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// `1e3`.
    DecimalExponent,
    /// `1Ki`.
    BinarySi,
    /// `1k`.
    DecimalSi,
}

impl Quantity {
    /// The format upstream gives a quantity parsed from this text.
    pub fn format(&self) -> QuantityFormat {
        let suffix = self
            .as_str()
            .trim_start_matches(['+', '-'])
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        if suffix.ends_with('i') {
            QuantityFormat::BinarySi
        } else if suffix.starts_with(['e', 'E']) {
            QuantityFormat::DecimalExponent
        } else {
            QuantityFormat::DecimalSi
        }
    }
}

/// A sum of whole quantities as upstream's `Quantity.Add` keeps it: the value and the
/// format it prints in.
///
/// # Example
///
/// ```
/// use corral_topology::{Quantity, QuantityFormat, QuantitySum};
///
/// let mut sum = QuantitySum::new(Some(QuantityFormat::DecimalSi));
/// sum.add(&Quantity::parse("1Gi")?)?;
/// sum.add(&Quantity::parse("512Mi")?)?;
/// assert_eq!(sum.to_string(), "1536Mi");
/// assert_eq!(QuantitySum::new(Some(QuantityFormat::DecimalSi)).to_string(), "0");
/// # Ok::<(), corral_topology::QuantityError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantitySum {
    value: i64,
    format: Option<QuantityFormat>,
}

impl QuantitySum {
    /// Zero in `format` (`None`: Go's zero `Quantity{}`, what a missing map entry reads as).
    pub fn new(format: Option<QuantityFormat>) -> QuantitySum {
        QuantitySum { value: 0, format }
    }

    /// A whole value in `format` (upstream `NewQuantity`).
    pub fn of(value: i64, format: QuantityFormat) -> QuantitySum {
        QuantitySum {
            value,
            format: Some(format),
        }
    }

    /// Adds a parsed quantity (its value rounded away from zero, as `Value()`).
    pub fn add(&mut self, quantity: &Quantity) -> Result<(), QuantityError> {
        let value = quantity.value()?;
        self.add_sum(QuantitySum::of(value, quantity.format()))
            .ok_or_else(|| QuantityError::Overflow {
                quantity: quantity.as_str().to_owned(),
                unit: "value",
            })
    }

    /// Adds another sum; `None` on overflow.
    pub fn add_sum(&mut self, other: QuantitySum) -> Option<()> {
        if self.value == 0 {
            self.format = other.format;
        }
        self.value = self.value.checked_add(other.value)?;
        Some(())
    }

    /// The value.
    pub fn value(&self) -> i64 {
        self.value
    }
}

impl fmt::Display for QuantitySum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value;
        if value == 0 {
            return f.write_str("0");
        }
        if self.format == Some(QuantityFormat::BinarySi) && !(-1024 < value && value < 1024) {
            let mut amount = value;
            let mut power = 0;
            while amount % 1024 == 0 && power < 6 {
                amount /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{amount}{suffix}");
        }
        let mut amount = value;
        let mut exponent = 0;
        while amount % 1000 == 0 {
            amount /= 1000;
            exponent += 3;
        }
        if matches!(
            self.format,
            Some(QuantityFormat::DecimalSi | QuantityFormat::BinarySi)
        ) {
            let suffix = ["", "k", "M", "G", "T", "P", "E"][exponent / 3];
            write!(f, "{amount}{suffix}")
        } else if exponent == 0 {
            write!(f, "{amount}")
        } else {
            write!(f, "{amount}e{exponent}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(value: i64, format: QuantityFormat) -> String {
        QuantitySum::of(value, format).to_string()
    }

    #[test]
    fn prints_as_upstream() {
        use QuantityFormat::*;
        for (value, format, want) in [
            (0, BinarySi, "0"),
            (1 << 30, BinarySi, "1Gi"),
            (1536 << 20, BinarySi, "1536Mi"),
            (1000, BinarySi, "1k"),
            (1025, BinarySi, "1025"),
            (2048, BinarySi, "2Ki"),
            (-2048, BinarySi, "-2Ki"),
            (1500, DecimalSi, "1500"),
            (2000, DecimalSi, "2k"),
            (14, DecimalSi, "14"),
            (100, DecimalSi, "100"),
            (3_000_000_000, DecimalSi, "3G"),
            (2000, DecimalExponent, "2e3"),
            (77, DecimalExponent, "77"),
        ] {
            assert_eq!(printed(value, format), want, "{value} {format:?}");
        }
    }

    #[test]
    fn formats_come_from_suffixes_and_sums_adopt_them_at_zero() {
        let q = |t: &str| Quantity::parse(t).unwrap();
        assert_eq!(q("1Gi").format(), QuantityFormat::BinarySi);
        assert_eq!(q("1e3").format(), QuantityFormat::DecimalExponent);
        assert_eq!(q("100").format(), QuantityFormat::DecimalSi);
        assert_eq!(q("1.5k").format(), QuantityFormat::DecimalSi);
        let mut sum = QuantitySum::new(Some(QuantityFormat::DecimalSi));
        sum.add(&q("0")).unwrap();
        sum.add(&q("1Gi")).unwrap();
        sum.add(&q("1000")).unwrap();
        // BinarySI, not a whole number of Ki: printed from the value's own factors.
        assert_eq!(sum.to_string(), "1073742824");
        let mut sum = QuantitySum::new(None);
        sum.add_sum(QuantitySum::new(None)).unwrap();
        sum.add(&q("3Gi")).unwrap();
        assert_eq!(sum.to_string(), "3Gi");
    }
}

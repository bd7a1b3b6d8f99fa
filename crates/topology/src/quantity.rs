//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`) for the
//! three kinds the managers read: CPU in millicores, memory in bytes, extended resources as
//! integer counts.
//!
//! Grammar (upstream's): `[+-]` then `digits`, `digits.digits`, `digits.` or `.digits`, then a
//! suffix: binary SI `Ki Mi Gi Ti Pi Ei`, decimal SI `m "" k M G T P E`, or a decimal exponent
//! `e<int>`/`E<int>`. The value is kept exact (mantissa × 10^a × 2^b); conversions round
//! away from zero as upstream's `MilliValue` / `Value` do (`0.0001` CPU is 1 millicore).
//! Values whose conversion does not fit an `i64` are an error rather than upstream's
//! saturation.

use std::fmt;
use std::str::FromStr;

/// Why a quantity did not parse or convert.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// Not of the form `[+-]number[suffix]` (upstream `ErrFormatWrong`).
    #[error(
        "quantity {0:?} must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format(String),
    /// A number with an unknown suffix (upstream `ErrSuffix`).
    #[error("unable to parse quantity {0:?}'s suffix")]
    Suffix(String),
    /// Too many significant digits or an exponent too large for corral's exact arithmetic.
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
    /// A conversion whose result does not fit an `i64`.
    #[error("quantity {quantity:?} does not fit a 64-bit {unit}")]
    Overflow {
        /// The quantity as written.
        quantity: String,
        /// What it was converted to ("millivalue", "value").
        unit: &'static str,
    },
}

/// A parsed quantity: `sign × mantissa × 10^exp10 × 2^exp2`, exactly.
///
/// # Example
///
/// ```
/// use corral_topology::{Quantity, QuantityError};
///
/// let cpu: Quantity = "1.5".parse()?;
/// assert_eq!(cpu.milli_value()?, 1500);
/// let memory = Quantity::parse("4Gi")?;
/// assert_eq!(memory.value()?, 4 << 30);
/// assert_eq!(memory.to_string(), "4Gi", "printed as written");
/// // Upstream rounds up: a tenth of a millicore is one millicore.
/// assert_eq!(Quantity::parse("0.0001")?.milli_value()?, 1);
/// assert!(matches!(Quantity::parse("4Gb"), Err(QuantityError::Suffix(_))));
/// # Ok::<(), QuantityError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    text: String,
    negative: bool,
    mantissa: u128,
    exp10: i32,
    exp2: u32,
}

impl Quantity {
    /// Parse a quantity string.
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let format = || QuantityError::Format(text.to_owned());
        let too_large = || QuantityError::TooLarge(text.to_owned());
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'+') => (false, &text[1..]),
            Some(b'-') => (true, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .bytes()
            .position(|b| !(b.is_ascii_digit() || b == b'.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(format());
        }
        let mut mantissa: u128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(u128::from(b - b'0')))
                .ok_or_else(too_large)?;
        }
        let mut exp10 = -i32::try_from(frac_part.len()).map_err(|_| too_large())?;
        let mut exp2 = 0;
        // Checked: `exp10` may be near `i32::MIN` after billions of fraction digits.
        let mut shift = |by: i32| -> Result<(), QuantityError> {
            exp10 = exp10.checked_add(by).ok_or_else(too_large)?;
            Ok(())
        };
        match suffix {
            "" => {}
            "m" => shift(-3)?,
            "k" => shift(3)?,
            "M" => shift(6)?,
            "G" => shift(9)?,
            "T" => shift(12)?,
            "P" => shift(15)?,
            "E" => shift(18)?,
            "Ki" => exp2 = 10,
            "Mi" => exp2 = 20,
            "Gi" => exp2 = 30,
            "Ti" => exp2 = 40,
            "Pi" => exp2 = 50,
            "Ei" => exp2 = 60,
            _ => {
                let exponent = suffix
                    .strip_prefix(['e', 'E'])
                    .ok_or_else(|| QuantityError::Suffix(text.to_owned()))?;
                let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(QuantityError::Suffix(text.to_owned()));
                }
                let value: i32 = exponent
                    .strip_prefix('+')
                    .unwrap_or(exponent)
                    .parse()
                    .map_err(|_| too_large())?;
                shift(value)?;
            }
        }
        Ok(Quantity {
            text: text.to_owned(),
            negative: negative && mantissa != 0,
            mantissa,
            exp10,
            exp2,
        })
    }

    /// The value scaled by `10^scale`, rounded away from zero.
    fn scaled(&self, scale: i32, unit: &'static str) -> Result<i64, QuantityError> {
        let overflow = || QuantityError::Overflow {
            quantity: self.text.clone(),
            unit,
        };
        if self.mantissa == 0 {
            return Ok(0);
        }
        let numerator = self
            .mantissa
            .checked_mul(1u128.checked_shl(self.exp2).ok_or_else(overflow)?)
            .ok_or_else(overflow)?;
        // An exponent past `i32::MAX` (`1e2147483647` in millis) is far beyond any i64.
        let exp = self.exp10.checked_add(scale).ok_or_else(overflow)?;
        let magnitude = if exp >= 0 {
            let factor = 10u128
                .checked_pow(exp.unsigned_abs())
                .ok_or_else(overflow)?;
            numerator.checked_mul(factor).ok_or_else(overflow)?
        } else {
            match 10u128.checked_pow(exp.unsigned_abs()) {
                Some(divisor) => numerator.div_ceil(divisor),
                None => 1, // a positive value far below one unit rounds up to one
            }
        };
        let magnitude = i64::try_from(magnitude).map_err(|_| overflow())?;
        Ok(if self.negative { -magnitude } else { magnitude })
    }

    /// Upstream `MilliValue`: the value × 1000, rounded away from zero.
    pub fn milli_value(&self) -> Result<i64, QuantityError> {
        self.scaled(3, "millivalue")
    }

    /// Upstream `Value`: the value rounded away from zero.
    pub fn value(&self) -> Result<i64, QuantityError> {
        self.scaled(0, "value")
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The text the quantity was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parse a CPU quantity into millicores (`"500m"` → 500, `"1.5"` → 1500).
///
/// # Example
///
/// ```
/// assert_eq!(corral_topology::parse_cpu_millis("500m")?, 500);
/// assert_eq!(corral_topology::parse_cpu_millis("2")?, 2000);
/// assert!(corral_topology::parse_cpu_millis("two").is_err());
/// # Ok::<(), corral_topology::QuantityError>(())
/// ```
pub fn parse_cpu_millis(text: &str) -> Result<i64, QuantityError> {
    Quantity::parse(text)?.milli_value()
}

/// Parse a memory quantity into bytes (`"4Gi"` → 4294967296, `"1e3"` → 1000).
///
/// # Example
///
/// ```
/// assert_eq!(corral_topology::parse_bytes("4Gi")?, 4_294_967_296);
/// assert_eq!(corral_topology::parse_bytes("1e3")?, 1000);
/// assert_eq!(corral_topology::parse_bytes("1M")?, 1_000_000, "M is decimal, Mi binary");
/// # Ok::<(), corral_topology::QuantityError>(())
/// ```
pub fn parse_bytes(text: &str) -> Result<i64, QuantityError> {
    Quantity::parse(text)?.value()
}

/// Parse an extended-resource quantity into a count (`"2"` → 2, `"100k"` → 100000).
///
/// # Example
///
/// ```
/// assert_eq!(corral_topology::parse_count("2")?, 2);
/// assert_eq!(corral_topology::parse_count("100k")?, 100_000);
/// # Ok::<(), corral_topology::QuantityError>(())
/// ```
pub fn parse_count(text: &str) -> Result<i64, QuantityError> {
    Quantity::parse(text)?.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_millis() {
        for (text, want) in [
            ("500m", 500),
            ("2", 2000),
            ("1.5", 1500),
            ("0.1", 100),
            (".5", 500),
            ("1.", 1000),
            ("0.0001", 1),
            ("1e3", 1_000_000),
            ("100k", 100_000_000),
            ("+1", 1000),
            ("0", 0),
            ("1001m", 1001),
            ("1E-3", 1),
        ] {
            assert_eq!(parse_cpu_millis(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bytes_and_counts() {
        for (text, want) in [
            ("4Gi", 4 << 30),
            ("1Mi", 1 << 20),
            ("1Ki", 1024),
            ("1e3", 1000),
            ("100k", 100_000),
            ("1M", 1_000_000),
            ("1.5Gi", 3 << 29),
            ("1E", 1_000_000_000_000_000_000),
            ("1500m", 2),
            ("-1500m", -2),
        ] {
            assert_eq!(parse_bytes(text), Ok(want), "{text}");
        }
        assert_eq!(parse_count("3"), Ok(3));
    }

    #[test]
    fn errors() {
        for text in ["", ".", "abc", "1..2", "1.2.3", "--1", " 1"] {
            assert!(
                matches!(Quantity::parse(text), Err(QuantityError::Format(_))),
                "{text:?}"
            );
        }
        for text in ["1x", "1Gb", "1e", "1e+", "1ki", "1 "] {
            assert!(
                matches!(Quantity::parse(text), Err(QuantityError::Suffix(_))),
                "{text:?}"
            );
        }
        assert!(matches!(
            parse_bytes("10Ei"),
            Err(QuantityError::Overflow { .. })
        ));
        assert!(matches!(
            Quantity::parse("1e99999999999"),
            Err(QuantityError::TooLarge(_))
        ));
    }

    /// A decimal exponent of `i32::MAX` parses (it fits upstream's `int32`), and converting
    /// it used to panic adding the millis' 3 ("attempt to add with overflow"): it does not
    /// fit an i64, as any huge quantity.
    #[test]
    fn exponents_at_the_ends_of_i32_convert_without_overflow() {
        for text in [
            "1e2147483647",
            "1E+2147483647",
            "-1e2147483647",
            "5e2147483645",
        ] {
            let quantity = Quantity::parse(text).unwrap();
            assert!(
                matches!(quantity.milli_value(), Err(QuantityError::Overflow { .. })),
                "{text}"
            );
            assert!(
                matches!(quantity.value(), Err(QuantityError::Overflow { .. })),
                "{text}"
            );
        }
        assert_eq!(parse_cpu_millis("0e2147483647"), Ok(0));
        assert_eq!(parse_cpu_millis("1e-2147483648"), Ok(1));
        assert_eq!(parse_bytes("-1e-2147483648"), Ok(-1));
        assert!(matches!(
            Quantity::parse("0.5e-2147483648"),
            Err(QuantityError::TooLarge(_))
        ));
    }
}

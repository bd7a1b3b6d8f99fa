//! Kubernetes quantities (`"4"`, `"1500m"`, `"2Gi"`, `"1e3"`) read as exact amounts, so that the
//! filter compares a request with what a zone has free the way `resource.Quantity.Cmp` does.
//!
//! The grammar and the rounding are apimachinery's `ParseQuantity`
//! (`k8s.io/apimachinery/pkg/api/resource/quantity.go`): an optional sign, digits with an
//! optional fraction, then a suffix — none, decimal SI (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`,
//! `E`), binary SI (`Ki` … `Ei`) or a decimal exponent (`e3`, `E-2`). Amounts are kept in
//! nano-units, rounded away from zero below a nano (upstream's `inf.RoundUp` at `Nano`), and
//! binary amounts are capped at 2^63-1 units as upstream caps them. Upstream keeps decimal amounts
//! of any size exactly; here those beyond ±1.7·10^29 units are refused as out of range.

use std::fmt;
use std::str::FromStr;

use crate::object::Quantity;

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// An exact amount of a resource, as a Kubernetes quantity denotes it: CPUs, bytes, devices.
///
/// # Example
///
/// ```
/// use corral_nrt::Amount;
///
/// let cpu: Amount = "1500m".parse().unwrap();
/// assert_eq!(cpu, Amount::millis(1500));
/// assert_eq!(cpu.units_ceil(), 2);
/// assert!(cpu < Amount::units(2));
/// assert_eq!("2Gi".parse::<Amount>().unwrap(), Amount::units(2 << 30));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount {
    nanos: i128,
}

impl Amount {
    /// Nothing.
    pub const ZERO: Amount = Amount { nanos: 0 };

    /// `n` whole units (CPUs, bytes, devices).
    pub fn units(n: i64) -> Self {
        Self {
            nanos: i128::from(n) * NANOS_PER_UNIT,
        }
    }

    /// `n` thousandths of a unit (millicores for CPU).
    pub fn millis(n: i64) -> Self {
        Self {
            nanos: i128::from(n) * 1_000_000,
        }
    }

    /// `n` billionths of a unit, the finest amount a quantity can denote.
    pub fn nanos(n: i128) -> Self {
        Self { nanos: n }
    }

    /// The amount in billionths of a unit.
    pub fn as_nanos(self) -> i128 {
        self.nanos
    }

    /// Whole units, rounded up (upstream's `Quantity.Value`).
    pub fn units_ceil(self) -> i128 {
        ceil_div(self.nanos, NANOS_PER_UNIT)
    }

    /// Thousandths of a unit, rounded up (upstream's `Quantity.MilliValue`).
    pub fn millis_ceil(self) -> i128 {
        ceil_div(self.nanos, 1_000_000)
    }

    /// Whether the amount is nothing.
    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// Whether the amount is below zero.
    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// `self + other`, saturating at the bounds of the representation.
    pub fn saturating_add(self, other: Amount) -> Amount {
        Amount {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// `self - other`, saturating at the bounds of the representation (it may go below zero).
    pub fn saturating_sub(self, other: Amount) -> Amount {
        Amount {
            nanos: self.nanos.saturating_sub(other.nanos),
        }
    }

    /// Parses a Kubernetes quantity string.
    pub fn parse(text: &str) -> Result<Amount, QuantityError> {
        parse(text)
    }
}

impl FromStr for Amount {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse(text)
    }
}

impl fmt::Display for Amount {
    /// Whole units when exact, otherwise millis (`1500m`) or nanos (`3n`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANOS_PER_UNIT == 0 {
            write!(f, "{}", self.nanos / NANOS_PER_UNIT)
        } else if self.nanos % 1_000_000 == 0 {
            write!(f, "{}m", self.nanos / 1_000_000)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

impl Quantity {
    /// The amount this quantity denotes.
    pub fn amount(&self) -> Result<Amount, QuantityError> {
        parse(self.0.trim())
    }
}

/// Why a string is not a quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The empty string (upstream's `ErrFormatWrong`).
    #[error("empty quantity")]
    Empty,
    /// Characters after the number that no suffix or exponent explains (upstream's
    /// `ErrFormatWrong`).
    #[error("quantity {text:?} is not a number with a suffix")]
    Format {
        /// The text read.
        text: String,
    },
    /// A suffix that is none of the known ones (upstream's `ErrSuffix`), such as `K` or `Mb`.
    #[error("quantity {text:?} has an unknown suffix")]
    Suffix {
        /// The text read.
        text: String,
    },
    /// A well-formed quantity too large to hold.
    #[error("quantity {text:?} is out of range")]
    OutOfRange {
        /// The text read.
        text: String,
    },
}

/// How a suffix scales the number before it.
enum Scale {
    /// Times 10 to this power.
    Decimal(i64),
    /// Times 2 to this power.
    Binary(u32),
}

fn parse(text: &str) -> Result<Amount, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negative = match bytes[0] {
        b'-' => {
            pos = 1;
            true
        }
        b'+' => {
            pos = 1;
            false
        }
        _ => false,
    };
    let int_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_digits = &text[int_start..pos];
    let mut frac_digits = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        frac_digits = &text[frac_start..pos];
    }
    let suffix = &text[pos..];
    check_suffix_shape(text, suffix)?;
    let scale = interpret_suffix(suffix).ok_or_else(|| QuantityError::Suffix {
        text: text.to_owned(),
    })?;
    let out_of_range = || QuantityError::OutOfRange {
        text: text.to_owned(),
    };
    let magnitude = magnitude_nanos(int_digits, frac_digits, &scale).ok_or_else(out_of_range)?;
    let magnitude = match scale {
        // Upstream caps binary amounts at maxAllowed = 2^63-1 units.
        Scale::Binary(_) => magnitude.min(i64::MAX as u128 * NANOS_PER_UNIT as u128),
        Scale::Decimal(_) => magnitude,
    };
    let nanos = i128::try_from(magnitude).map_err(|_| out_of_range())?;
    Ok(Amount {
        nanos: if negative { -nanos } else { nanos },
    })
}

/// Upstream's scanner: suffix letters from `eEinumkKMGTP`, then an optional sign, then digits to
/// the end; anything else is a format error.
fn check_suffix_shape(text: &str, suffix: &str) -> Result<(), QuantityError> {
    let rest = suffix.trim_start_matches(|c| "eEinumkKMGTP".contains(c));
    let rest = rest
        .strip_prefix('-')
        .or_else(|| rest.strip_prefix('+'))
        .unwrap_or(rest);
    if rest.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(QuantityError::Format {
            text: text.to_owned(),
        })
    }
}

fn interpret_suffix(suffix: &str) -> Option<Scale> {
    let decimal = match suffix {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(exp) = decimal {
        return Some(Scale::Decimal(exp));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(exp) = binary {
        return Some(Scale::Binary(exp));
    }
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    // strconv.ParseInt: an optional sign and at least one digit.
    let digits = exponent
        .strip_prefix('-')
        .or_else(|| exponent.strip_prefix('+'))
        .unwrap_or(exponent);
    if digits.is_empty() {
        return None;
    }
    exponent.parse::<i64>().ok().map(Scale::Decimal)
}

/// The magnitude of `int.frac × scale` in nano-units, rounded up; `None` when it does not fit.
fn magnitude_nanos(int_digits: &str, frac_digits: &str, scale: &Scale) -> Option<u128> {
    let int_digits = int_digits.trim_start_matches('0');
    let frac_digits = frac_digits.trim_end_matches('0');
    let mut mantissa: u128 = 0;
    for b in int_digits.bytes().chain(frac_digits.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(u128::from(b - b'0'))?;
    }
    if mantissa == 0 {
        return Some(0);
    }
    let frac_len = i64::try_from(frac_digits.len()).ok()?;
    match *scale {
        Scale::Decimal(exp) => {
            let power = exp.checked_add(9)?.checked_sub(frac_len)?;
            if power >= 0 {
                mantissa.checked_mul(pow10(u32::try_from(power).ok()?)?)
            } else {
                Some(div_ceil_pow10(mantissa, power.unsigned_abs()))
            }
        }
        Scale::Binary(exp) => {
            let scaled = mantissa
                .checked_mul(1u128 << exp)
                .and_then(|m| m.checked_mul(NANOS_PER_UNIT as u128));
            match scaled {
                Some(scaled) => Some(div_ceil_pow10(scaled, frac_len.unsigned_abs())),
                // Too large before dividing by the fraction: only the cap can hold it.
                None if frac_len == 0 => Some(u128::MAX),
                None => None,
            }
        }
    }
}

fn pow10(exp: u32) -> Option<u128> {
    10u128.checked_pow(exp)
}

/// `ceil(value / 10^exp)` for a positive `value`.
fn div_ceil_pow10(value: u128, exp: u64) -> u128 {
    match u32::try_from(exp).ok().and_then(pow10) {
        Some(divisor) => value.div_ceil(divisor),
        // 10^exp exceeds any u128: the quotient is in (0, 1), rounded up to one nano.
        None => 1,
    }
}

/// Rounds toward positive infinity.
fn ceil_div(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    if value % divisor > 0 {
        quotient + 1
    } else {
        quotient
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(text: &str) -> i128 {
        Amount::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .as_nanos()
    }

    #[test]
    fn plain_integers_and_signs() {
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("4"), 4_000_000_000);
        assert_eq!(nanos("+4"), 4_000_000_000);
        assert_eq!(nanos("-4"), -4_000_000_000);
        assert_eq!(nanos("007"), 7_000_000_000);
        // Upstream's scanner reads a lone sign or dot as zero.
        assert_eq!(nanos("+"), 0);
        assert_eq!(nanos("."), 0);
    }

    #[test]
    fn decimal_suffixes() {
        assert_eq!(Amount::parse("1500m").unwrap(), Amount::millis(1500));
        assert_eq!(Amount::parse("100m").unwrap(), Amount::millis(100));
        assert_eq!(nanos("5n"), 5);
        assert_eq!(nanos("5u"), 5_000);
        for (text, units) in [
            ("1k", 1_000i64),
            ("2M", 2_000_000),
            ("3G", 3_000_000_000),
            ("4T", 4_000_000_000_000),
            ("5P", 5_000_000_000_000_000),
            ("6E", 6_000_000_000_000_000_000),
            ("40G", 40_000_000_000),
        ] {
            assert_eq!(Amount::parse(text).unwrap(), Amount::units(units), "{text}");
        }
    }

    #[test]
    fn binary_suffixes() {
        for (text, units) in [
            ("1Ki", 1i64 << 10),
            ("8Mi", 8 << 20),
            ("2Gi", 2 << 30),
            ("3Ti", 3 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("3328Mi", 3328 << 20),
        ] {
            assert_eq!(Amount::parse(text).unwrap(), Amount::units(units), "{text}");
        }
        // Fractions: 1.5Gi is 1.5 × 2^30 bytes exactly.
        assert_eq!(Amount::parse("1.5Gi").unwrap(), Amount::units(3 << 29));
        // Binary amounts are capped at 2^63-1 units, as upstream caps them.
        assert_eq!(Amount::parse("16Ei").unwrap(), Amount::units(i64::MAX));
        assert_eq!(
            Amount::parse("99999999999999999999999999999999999Ei").unwrap(),
            Amount::units(i64::MAX)
        );
    }

    #[test]
    fn exponents_and_fractions() {
        assert_eq!(Amount::parse("1e3").unwrap(), Amount::units(1000));
        assert_eq!(Amount::parse("1E3").unwrap(), Amount::units(1000));
        assert_eq!(Amount::parse("15e-1").unwrap(), Amount::millis(1500));
        assert_eq!(Amount::parse("1e+2").unwrap(), Amount::units(100));
        assert_eq!(Amount::parse("0.5").unwrap(), Amount::millis(500));
        assert_eq!(Amount::parse(".5").unwrap(), Amount::millis(500));
        assert_eq!(Amount::parse("1.").unwrap(), Amount::units(1));
        assert_eq!(Amount::parse("1.500").unwrap(), Amount::millis(1500));
        // "E" alone is exa; "E" with digits is an exponent.
        assert_eq!(
            Amount::parse("2E").unwrap(),
            Amount::units(2_000_000_000_000_000_000)
        );
    }

    #[test]
    fn below_a_nano_rounds_away_from_zero() {
        assert_eq!(nanos("0.1n"), 1);
        assert_eq!(nanos("1.0000000001"), 1_000_000_001);
        assert_eq!(nanos("-0.1n"), -1);
        assert_eq!(nanos("1e-30"), 1);
        assert_eq!(nanos("0.000000000000000000000000000000000000000000001"), 1);
        assert_eq!(nanos("0.000"), 0);
    }

    #[test]
    fn rounding_up_to_units_and_millis() {
        assert_eq!(Amount::millis(1500).units_ceil(), 2);
        assert_eq!(Amount::units(2).units_ceil(), 2);
        assert_eq!(Amount::nanos(1).millis_ceil(), 1);
        assert_eq!(Amount::millis(-1500).units_ceil(), -1);
        assert_eq!(Amount::ZERO.units_ceil(), 0);
    }

    #[test]
    fn malformed_quantities_are_refused_with_their_kind() {
        assert_eq!(Amount::parse(""), Err(QuantityError::Empty));
        for text in [
            "1Gb", "1K", "1e", "1ki", "1mi", "1.5.5", "1 ", " 1", "1Mi2", "1e1.5",
        ] {
            let err = Amount::parse(text).unwrap_err();
            assert!(
                matches!(
                    err,
                    QuantityError::Format { .. } | QuantityError::Suffix { .. }
                ),
                "{text}: {err:?}"
            );
        }
        assert!(matches!(
            Amount::parse("abc"),
            Err(QuantityError::Format { .. }) | Err(QuantityError::Suffix { .. })
        ));
        assert_eq!(
            Amount::parse("1e40"),
            Err(QuantityError::OutOfRange {
                text: "1e40".into()
            })
        );
    }

    #[test]
    fn object_quantities_read_as_amounts() {
        assert_eq!(
            Quantity("8Gi".into()).amount().unwrap(),
            Amount::units(8 << 30)
        );
        assert_eq!(Quantity::from(12).amount().unwrap(), Amount::units(12));
    }

    #[test]
    fn amounts_display_exactly() {
        assert_eq!(Amount::units(4).to_string(), "4");
        assert_eq!(Amount::millis(1500).to_string(), "1500m");
        assert_eq!(Amount::nanos(7).to_string(), "7n");
    }
}

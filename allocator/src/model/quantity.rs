//! Kubernetes resource quantities (`80Gi`, `500m`, `1.5`, `1e3`), parsed exactly and compared
//! numerically. Owns only text parsing and arithmetic; depends on nothing but serde.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// The largest magnitude a quantity may have, in milli-units (Kubernetes caps at 2^63-1 units).
const MAX_MILLI: u128 = i64::MAX as u128 * 1000;
/// Significant digits a mantissa may carry (a `u128` holds 38 decimal digits safely).
const MAX_DIGITS: usize = 38;
/// Largest accepted decimal exponent magnitude (`1e400` is out of range anyway).
const MAX_EXPONENT: i32 = 1000;

/// How a quantity was written; kept only so that [`fmt::Display`] prints it back in kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Format {
    /// `Ki`, `Mi`, ... (powers of 1024).
    BinarySi,
    /// `m`, none, `k`, `M`, ... (powers of 1000).
    DecimalSi,
    /// `e3`, `E-3`, ... (powers of ten).
    DecimalExponent,
}

/// A Kubernetes quantity stored exactly in milli-units.
///
/// Equality, ordering and hashing are by value: `1Gi == 1073741824` and `1000m == 1`.
/// Precision finer than `1m` is rounded up (away from zero), as Kubernetes does.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    milli: i128,
    format: Format,
}

impl Quantity {
    /// Parses Kubernetes quantity text: a signed decimal number followed by an optional
    /// binary-SI suffix (`Ki`..`Ei`), decimal-SI suffix (`m`, `k`, `M`..`E`) or exponent (`e3`).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        parse(text).map_err(|reason| ParseError::Quantity {
            input: text.to_owned(),
            reason,
        })
    }

    /// A quantity of whole units, printed without suffix scaling surprises (`Quantity::from_units(2)` is `2`).
    pub fn from_units(units: i64) -> Self {
        Quantity {
            milli: i128::from(units) * 1000,
            format: Format::DecimalSi,
        }
    }

    /// The exact value in milli-units (`1` is `1000`, `500m` is `500`).
    pub fn milli(&self) -> i128 {
        self.milli
    }

    /// The sum of `self` and `other`, printed in `self`'s kind (`40Gi + 40Gi` is `80Gi`);
    /// saturates at the largest quantity Kubernetes allows.
    #[must_use]
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        let limit = i128::from(i64::MAX) * 1000;
        Quantity {
            milli: self.milli.saturating_add(other.milli).clamp(-limit, limit),
            format: self.format,
        }
    }

    /// `self` as a fraction of `whole` (`10Gi` of `80Gi` is 0.125); `None` unless `whole` is
    /// positive.
    pub fn fraction_of(&self, whole: &Quantity) -> Option<f64> {
        // Quantities are below 2^63 units: the nearest f64 of each is close enough for a ratio.
        (whole.milli > 0).then(|| self.milli as f64 / whole.milli as f64)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.milli == other.milli
    }
}

impl Eq for Quantity {}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.milli.hash(state);
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.milli.cmp(&other.milli)
    }
}

impl FromStr for Quantity {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

const DECIMAL_SUFFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The largest `k <= 6` such that `base^k` divides `value`, and `value / base^k`.
fn largest_power(value: u128, base: u128) -> (usize, u128) {
    let mut k = 0;
    let mut rest = value;
    while k < 6 && rest.is_multiple_of(base) {
        rest /= base;
        k += 1;
    }
    (k, rest)
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli == 0 {
            return f.write_str("0");
        }
        if self.milli < 0 {
            f.write_str("-")?;
        }
        let magnitude = self.milli.unsigned_abs();
        if !magnitude.is_multiple_of(1000) {
            return match self.format {
                Format::DecimalExponent => write!(f, "{magnitude}e-3"),
                Format::BinarySi | Format::DecimalSi => write!(f, "{magnitude}m"),
            };
        }
        let units = magnitude / 1000;
        match self.format {
            Format::BinarySi if units.is_multiple_of(1024) => {
                let (k, rest) = largest_power(units, 1024);
                write!(f, "{rest}{}", BINARY_SUFFIXES[k])
            }
            Format::DecimalExponent => {
                let (k, rest) = largest_power(units, 1000);
                if k == 0 {
                    write!(f, "{rest}")
                } else {
                    write!(f, "{rest}e{}", 3 * k)
                }
            }
            Format::BinarySi | Format::DecimalSi => {
                let (k, rest) = largest_power(units, 1000);
                write!(f, "{rest}{}", DECIMAL_SUFFIXES[k])
            }
        }
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Quantity::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Splits `text` into (negative, integer digits, fraction digits, rest).
fn split_number(text: &str) -> Result<(bool, &str, &str, &str), &'static str> {
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        Some(_) => (false, text),
        None => return Err("empty quantity"),
    };
    let int_len = body.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, rest) = body.split_at(int_len);
    let (frac_digits, rest) = if let Some(after_dot) = rest.strip_prefix('.') {
        let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        after_dot.split_at(frac_len)
    } else {
        ("", rest)
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err("no digits");
    }
    Ok((negative, int_digits, frac_digits, rest))
}

/// The power of ten (`exp10`) and power of 1024 (`exp1024`) a suffix stands for.
fn parse_suffix(suffix: &str) -> Result<(Format, i32, u32), &'static str> {
    let decimal = |exp10| Ok((Format::DecimalSi, exp10, 0));
    let binary = |exp1024| Ok((Format::BinarySi, 0, exp1024));
    match suffix {
        "" => decimal(0),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or("unknown suffix")?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err("exponent is not an integer");
            }
            let value: i32 = exponent.parse().map_err(|_| "exponent out of range")?;
            if value.abs() > MAX_EXPONENT {
                return Err("exponent out of range");
            }
            Ok((Format::DecimalExponent, value, 0))
        }
    }
}

fn parse(text: &str) -> Result<Quantity, &'static str> {
    let (negative, int_digits, frac_digits, suffix) = split_number(text)?;
    let (format, exp10, exp1024) = parse_suffix(suffix)?;

    // Significant digits of the mantissa; trailing fraction zeros do not change the value.
    let frac_digits = frac_digits.trim_end_matches('0');
    let digits: String = int_digits.chars().chain(frac_digits.chars()).collect();
    let digits = digits.trim_start_matches('0');
    if digits.len() > MAX_DIGITS {
        return Err("too many significant digits");
    }
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| "too many significant digits")?
    };
    let frac_len = i32::try_from(frac_digits.len()).map_err(|_| "too many digits")?;

    // value in milli-units = mantissa * 1024^exp1024 * 10^(exp10 + 3 - frac_len)
    let mut value = mantissa;
    for _ in 0..exp1024 {
        value = value.checked_mul(1024).ok_or("value out of range")?;
    }
    let power = exp10 + 3 - frac_len;
    let milli = if mantissa == 0 {
        0
    } else if power >= 0 {
        let factor = 10u128
            .checked_pow(power.unsigned_abs())
            .ok_or("value out of range")?;
        value.checked_mul(factor).ok_or("value out of range")?
    } else if power.unsigned_abs() > MAX_DIGITS as u32 {
        // Far below one milli-unit: rounds up to the smallest step.
        1
    } else {
        value.div_ceil(10u128.pow(power.unsigned_abs()))
    };
    if milli > MAX_MILLI {
        return Err("value out of range");
    }
    let milli = i128::try_from(milli).map_err(|_| "value out of range")?;
    Ok(Quantity {
        milli: if negative { -milli } else { milli },
        format,
    })
}

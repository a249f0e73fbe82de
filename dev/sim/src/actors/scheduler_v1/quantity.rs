//! Kubernetes quantities in CEL, as the apiserver's quantity library has them: the
//! `quantity(string)` and `isQuantity(string)` functions and the `Quantity` methods
//! `compareTo`, `isGreaterThan`, `isLessThan`, `add`, `sub`, `asInteger`,
//! `asApproximateFloat`, `sign` and `isInteger`; `==` compares values (`1Gi == 1024Mi`).
//!
//! A quantity is held exactly as a number of nano units (`i128`), the smallest precision a
//! Kubernetes quantity keeps (finer values round up, as `ParseQuantity` does), which covers
//! every suffix up to `Ei` and exponents up to `e29`. Pure: no I/O.

use std::any::Any;
use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::error::QuantityError;

/// The CEL type of a quantity.
static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

/// Nano units per unit.
const NANO: i128 = 1_000_000_000;

/// A Kubernetes quantity (`80Gi`, `500m`, `1.5e3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// The quantity of `value` whole units.
    pub fn from_int(value: i64) -> Self {
        Self {
            nanos: i128::from(value) * NANO,
        }
    }

    /// Parses the Kubernetes quantity grammar: a signed decimal number, then a binary suffix
    /// (`Ki` .. `Ei`), a decimal one (`n u m "" k M G T P E`) or an exponent (`e3`, `E-2`).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(QuantityError::Syntax);
        }
        let digits = format!("{whole}{fraction}");
        let mantissa: i128 = digits.parse().map_err(|_| QuantityError::Syntax)?;
        let scale = i32::try_from(fraction.len()).map_err(|_| QuantityError::Syntax)?;
        // value = mantissa * 10^-scale * multiplier
        let (binary, decimal_exponent): (u32, i32) = match suffix {
            "Ki" => (10, 0),
            "Mi" => (20, 0),
            "Gi" => (30, 0),
            "Ti" => (40, 0),
            "Pi" => (50, 0),
            "Ei" => (60, 0),
            "n" => (0, -9),
            "u" => (0, -6),
            "m" => (0, -3),
            "" => (0, 0),
            "k" => (0, 3),
            "M" => (0, 6),
            "G" => (0, 9),
            "T" => (0, 12),
            "P" => (0, 15),
            "E" => (0, 18),
            exponent => {
                let digits = exponent
                    .strip_prefix(['e', 'E'])
                    .ok_or(QuantityError::Syntax)?;
                let unsigned = digits.trim_start_matches(['+', '-']);
                if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(QuantityError::Syntax);
                }
                (0, digits.parse().map_err(|_| QuantityError::Syntax)?)
            }
        };
        let too_large = QuantityError::TooLarge;
        let scaled = mantissa
            .checked_mul(1_i128.checked_shl(binary).ok_or(too_large)?)
            .ok_or(too_large)?;
        let exponent = 9 + decimal_exponent - scale;
        let nanos = if exponent >= 0 {
            let factor = 10_i128
                .checked_pow(u32::try_from(exponent).map_err(|_| too_large)?)
                .ok_or(too_large)?;
            scaled.checked_mul(factor).ok_or(too_large)?
        } else {
            let divisor = 10_i128
                .checked_pow(u32::try_from(-exponent).map_err(|_| too_large)?)
                .unwrap_or(i128::MAX);
            // Finer than a nano unit: rounded up, away from zero.
            let rounded = scaled / divisor;
            if scaled % divisor == 0 {
                rounded
            } else {
                rounded + 1
            }
        };
        Ok(Self {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// The quantity of `nanos` nano units.
    pub fn from_nanos(nanos: i128) -> Self {
        Self { nanos }
    }

    /// The value in nano units.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// The value as an integer, when it is whole and fits in 64 bits.
    pub fn as_integer(self) -> Option<i64> {
        if self.nanos % NANO != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANO).ok()
    }

    /// The value as the nearest float.
    pub fn as_float(self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    fn checked(nanos: Option<i128>) -> Result<Self, ExecutionError> {
        nanos
            .map(|nanos| Self { nanos })
            .ok_or_else(|| ExecutionError::function_error("add", "quantity overflow"))
    }
}

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Quantity>() == Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Quantity {}

fn quantity(text: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    Quantity::parse(text.inner()).map_err(|error| ExecutionError::function_error("quantity", error))
}

fn is_quantity(text: &CelString<'_>) -> CelBool {
    Quantity::parse(text.inner()).is_ok().into()
}

fn ordering(order: Ordering) -> CelInt {
    match order {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
    .into()
}

fn compare_to(this: &Quantity, other: &Quantity) -> CelInt {
    ordering(this.cmp(other))
}

fn is_greater_than(this: &Quantity, other: &Quantity) -> CelBool {
    (this > other).into()
}

fn is_less_than(this: &Quantity, other: &Quantity) -> CelBool {
    (this < other).into()
}

fn add(this: &Quantity, other: &Quantity) -> Result<Quantity, ExecutionError> {
    Quantity::checked(this.nanos.checked_add(other.nanos))
}

#[allow(clippy::trivially_copy_pass_by_ref)] // the overload macros hand arguments by reference
fn add_int(this: &Quantity, other: &CelInt) -> Result<Quantity, ExecutionError> {
    add(this, &Quantity::from_int(*other.inner()))
}

fn sub(this: &Quantity, other: &Quantity) -> Result<Quantity, ExecutionError> {
    Quantity::checked(this.nanos.checked_sub(other.nanos))
}

#[allow(clippy::trivially_copy_pass_by_ref)] // the overload macros hand arguments by reference
fn sub_int(this: &Quantity, other: &CelInt) -> Result<Quantity, ExecutionError> {
    sub(this, &Quantity::from_int(*other.inner()))
}

fn as_integer(this: &Quantity) -> Result<CelInt, ExecutionError> {
    this.as_integer().map(CelInt::from).ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })
}

fn as_approximate_float(this: &Quantity) -> CelDouble {
    this.as_float().into()
}

fn sign(this: &Quantity) -> CelInt {
    ordering(this.nanos.cmp(&0))
}

fn is_integer(this: &Quantity) -> CelBool {
    this.as_integer().is_some().into()
}

/// Registers the quantity functions and methods on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(QUANTITY_TYPE.to_owned())?;
    cel::add_overload!(env, fn quantity: (CelString) -> Result<Quantity>)?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool)?;
    cel::add_member_overload!(env, fn compare_to: (Quantity, Quantity) -> CelInt)?;
    cel::add_member_overload!(env, fn is_greater_than: (Quantity, Quantity) -> CelBool)?;
    cel::add_member_overload!(env, fn is_less_than: (Quantity, Quantity) -> CelBool)?;
    cel::add_member_overload!(env, fn add: (Quantity, Quantity) -> Result<Quantity>)?;
    cel::add_member_overload!(env, fn add_int: (Quantity, CelInt) -> Result<Quantity>,
        name = "add")?;
    cel::add_member_overload!(env, fn sub: (Quantity, Quantity) -> Result<Quantity>)?;
    cel::add_member_overload!(env, fn sub_int: (Quantity, CelInt) -> Result<Quantity>,
        name = "sub")?;
    cel::add_member_overload!(env, fn as_integer: (Quantity) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn as_approximate_float: (Quantity) -> CelDouble)?;
    cel::add_member_overload!(env, fn sign: (Quantity) -> CelInt)?;
    cel::add_member_overload!(env, fn is_integer: (Quantity) -> CelBool)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap()
    }

    #[test]
    fn binary_decimal_and_exponent_suffixes_parse_to_exact_values() {
        assert_eq!(q("1Ki"), Quantity::from_int(1024));
        assert_eq!(q("1.5Gi"), Quantity::from_int(1_610_612_736));
        assert_eq!(q("2k"), Quantity::from_int(2000));
        assert_eq!(q("2e3"), Quantity::from_int(2000));
        assert_eq!(q("2E3"), Quantity::from_int(2000));
        assert_eq!(q("1E"), Quantity::from_int(1_000_000_000_000_000_000));
        assert_eq!(q("1Ei"), Quantity::from_int(1 << 60));
        assert_eq!(q("500m").nanos, NANO / 2);
        assert_eq!(q("-3"), Quantity::from_int(-3));
        assert_eq!(q("+.5").nanos, NANO / 2);
        assert_eq!(q("1n").nanos, 1);
        assert_eq!(q("0.1n").nanos, 1, "finer than nano rounds up");
        assert_eq!(q("1e-2").nanos, NANO / 100);
    }

    #[test]
    fn malformed_quantities_are_refused() {
        for bad in [
            "", "Gi", "80GB", "eighty", "1..2", "1e", "1e+", "--1", "1.2.3", ".",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Quantity::parse("1e99"), Err(QuantityError::TooLarge));
    }

    #[test]
    fn quantities_compare_by_value_across_suffixes() {
        assert!(q("80Gi") > q("40Gi"));
        assert!(q("1000Mi") < q("1Gi"));
        assert!(q("1Gi") > q("1G"));
        assert_eq!(q("1024Mi"), q("1Gi"));
        assert_eq!(q("1k"), q("1000"));
        assert!(q("999m") < q("1"));
    }

    #[test]
    fn integers_are_whole_values_that_fit_in_64_bits() {
        assert_eq!(q("1Gi").as_integer(), Some(1 << 30));
        assert_eq!(q("1500m").as_integer(), None);
        assert_eq!(q("16Ei").as_integer(), None);
    }
}

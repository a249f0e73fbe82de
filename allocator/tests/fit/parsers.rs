//! Property tests of the model's parsers: arbitrary text never panics, generated valid
//! quantities and versions round-trip through their canonical text and compare like an
//! independent reference, and requirement validation accepts exactly the well-formed shapes.

use std::cmp::Ordering;

use dra_allocator::model::{Operator, Quantity, Requirement, Version};
use proptest::prelude::*;

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,24}") {
        let _ = Quantity::parse(&text);
        let _ = Version::parse(&text);
        let _ = text.parse::<Operator>();
        for operator in [Operator::In, Operator::Gt, Operator::Exists] {
            let _ = Requirement { attribute: text.clone(), operator, values: vec![text.clone()] }
                .validate("spec.selector[0]");
        }
    }

    #[test]
    fn quantity_like_text_never_panics(text in "[-+]?[0-9]{0,40}(\\.[0-9]{0,40})?([eE][-+]?[0-9]{0,6}|[kMGTPEm]|[KMGTPE]i)?") {
        let _ = Quantity::parse(&text);
    }
}

/// Suffixes with their exact multiplier as a fraction (numerator, denominator).
const SUFFIXES: &[(&str, i128, i128)] = &[
    ("", 1, 1),
    ("m", 1, 1000),
    ("k", 1_000, 1),
    ("M", 1_000_000, 1),
    ("G", 1_000_000_000, 1),
    ("Ki", 1 << 10, 1),
    ("Mi", 1 << 20, 1),
    ("Gi", 1 << 30, 1),
    ("Ti", 1 << 40, 1),
    ("e-6", 1, 1_000_000),
    ("e-2", 1, 100),
    ("e0", 1, 1),
    ("e3", 1_000, 1),
    ("E6", 1_000_000, 1),
];

/// Quantity text and its value in milli-units by plain i128 arithmetic, rounded up away from
/// zero below one milli-unit.
fn quantity() -> impl Strategy<Value = (String, i128)> {
    (
        any::<bool>(),
        0u64..1_000_000,
        prop::collection::vec(0u8..10, 0..4),
        0..SUFFIXES.len(),
    )
        .prop_map(|(negative, whole, fraction, suffix)| {
            let (name, num, den) = SUFFIXES[suffix];
            let fraction_text: String = fraction.iter().map(|d| char::from(b'0' + d)).collect();
            let scale = 10i128.pow(fraction.len() as u32);
            let digits = i128::from(whole) * scale
                + fraction
                    .iter()
                    .fold(0i128, |acc, d| acc * 10 + i128::from(*d));
            let numerator = digits * num * 1000;
            let denominator = scale * den;
            let magnitude = (numerator + denominator - 1) / denominator;
            let sign = if negative { "-" } else { "" };
            let dot = if fraction.is_empty() { "" } else { "." };
            let text = format!("{sign}{whole}{dot}{fraction_text}{name}");
            (text, if negative { -magnitude } else { magnitude })
        })
}

proptest! {
    #[test]
    fn quantities_match_the_reference_value((text, milli) in quantity()) {
        let parsed = Quantity::parse(&text).unwrap();
        prop_assert_eq!(parsed.milli(), milli);
    }

    #[test]
    fn quantities_round_trip_through_canonical_text((text, _) in quantity()) {
        let parsed = Quantity::parse(&text).unwrap();
        let canonical = parsed.to_string();
        let again = Quantity::parse(&canonical).unwrap();
        prop_assert_eq!(again, parsed);
        prop_assert_eq!(again.to_string(), canonical);
    }

    #[test]
    fn quantities_order_like_their_reference((a, ma) in quantity(), (b, mb) in quantity()) {
        let (qa, qb) = (Quantity::parse(&a).unwrap(), Quantity::parse(&b).unwrap());
        prop_assert_eq!(qa.cmp(&qb), ma.cmp(&mb));
        prop_assert_eq!(qa == qb, ma == mb);
    }
}

/// A pre-release identifier: numeric or alphanumeric.
#[derive(Clone, Debug)]
enum Id {
    Num(u64),
    Alpha(String),
}

fn identifier() -> impl Strategy<Value = Id> {
    prop_oneof![
        (0u64..20).prop_map(Id::Num),
        "[a-z][a-z0-9-]{0,4}".prop_map(Id::Alpha),
    ]
}

fn version() -> impl Strategy<Value = ((u64, u64, u64), Vec<Id>, Option<String>)> {
    (
        (0u64..4, 0u64..4, 0u64..4),
        prop::collection::vec(identifier(), 0..3),
        prop::option::of("[a-z0-9]{1,4}"),
    )
}

fn text_of(((ma, mi, pa), pre, build): &((u64, u64, u64), Vec<Id>, Option<String>)) -> String {
    let mut text = format!("{ma}.{mi}.{pa}");
    for (i, id) in pre.iter().enumerate() {
        text.push(if i == 0 { '-' } else { '.' });
        match id {
            Id::Num(n) => text.push_str(&n.to_string()),
            Id::Alpha(s) => text.push_str(s),
        }
    }
    if let Some(build) = build {
        text.push('+');
        text.push_str(build);
    }
    text
}

/// Semver precedence written out independently of the crate.
fn reference_cmp(
    a: &((u64, u64, u64), Vec<Id>, Option<String>),
    b: &((u64, u64, u64), Vec<Id>, Option<String>),
) -> Ordering {
    a.0.cmp(&b.0)
        .then_with(|| match (a.1.is_empty(), b.1.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                for (x, y) in a.1.iter().zip(&b.1) {
                    let o = match (x, y) {
                        (Id::Num(x), Id::Num(y)) => x.cmp(y),
                        (Id::Num(_), Id::Alpha(_)) => Ordering::Less,
                        (Id::Alpha(_), Id::Num(_)) => Ordering::Greater,
                        (Id::Alpha(x), Id::Alpha(y)) => x.as_bytes().cmp(y.as_bytes()),
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                a.1.len().cmp(&b.1.len())
            }
        })
}

proptest! {
    #[test]
    fn versions_round_trip_exactly(v in version()) {
        let text = text_of(&v);
        let parsed = Version::parse(&text).unwrap();
        prop_assert_eq!(parsed.to_string(), text);
    }

    #[test]
    fn versions_order_like_the_reference(a in version(), b in version()) {
        let (va, vb) = (Version::parse(&text_of(&a)).unwrap(), Version::parse(&text_of(&b)).unwrap());
        prop_assert_eq!(va.cmp(&vb), reference_cmp(&a, &b));
    }
}

/// A requirement value and whether it parses as a number, quantity or version.
fn value() -> impl Strategy<Value = (String, bool)> {
    prop_oneof![
        quantity().prop_map(|(text, _)| (text, true)),
        version().prop_map(|v| (text_of(&v), true)),
        "[a-zA-Z_]{1,6}".prop_map(|s| (s, false)),
        Just((String::new(), false)),
        Just(("1.2".to_owned() + "x", false)),
    ]
}

fn operator() -> impl Strategy<Value = Operator> {
    prop::sample::select(vec![
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
        Operator::Gt,
        Operator::Lt,
    ])
}

proptest! {
    #[test]
    fn requirement_validation_accepts_exactly_the_valid_shapes(
        operator in operator(),
        values in prop::collection::vec(value(), 0..3),
        index in 0usize..5,
    ) {
        let requirement = Requirement {
            attribute: "model".into(),
            operator,
            values: values.iter().map(|(v, _)| v.clone()).collect(),
        };
        let path = format!("spec.selector[{index}]");
        let valid = match operator {
            Operator::In | Operator::NotIn => !values.is_empty(),
            Operator::Exists | Operator::DoesNotExist => values.is_empty(),
            Operator::Gt | Operator::Lt => values.len() == 1 && values[0].1,
        };
        match requirement.validate(&path) {
            Ok(()) => prop_assert!(valid),
            Err(e) => {
                prop_assert!(!valid);
                prop_assert!(e.field.starts_with(&format!("{path}.values")), "{}", e);
                prop_assert!(!e.reason.is_empty());
            }
        }
    }
}

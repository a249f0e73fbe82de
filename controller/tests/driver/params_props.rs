//! Property tests of the parameter objects' conversion (`DeviceClaimParameters` and
//! `DeviceClassParameters` specs into the allocator's model): any JSON that deserializes as a spec
//! converts or is refused without a panic, with an error naming a field that the input has (or
//! whose parent it has, for a required field that is missing); valid specs written from a model
//! convert back to that model; and a valid spec with exactly one field broken is refused naming
//! exactly that field.

use dra_allocator::model::{
    ClaimRequest, ClassDefaults, Operator, Policy, Requirement, Sharing, MAX_COUNT,
};
use dra_controller::params::{
    claim_request, class_defaults, DeviceClaimParametersSpec, DeviceClassParametersSpec,
    ParamsError, RequirementSpec, SharingSpec,
};
use proptest::prelude::*;
use serde_json::{json, Value};

const OPERATORS: [Operator; 6] = [
    Operator::In,
    Operator::NotIn,
    Operator::Exists,
    Operator::DoesNotExist,
    Operator::Gt,
    Operator::Lt,
];

/// Text a parameter object may hold: names, operators, numbers, blanks and anything else.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist",
            "Gt",
            "Lt",
            "in",
            "Exclusive",
            "Shared",
            "Pack",
            "Spread",
            "",
            " ",
            "model",
            "4Gi",
            "1.2.3",
            "-7",
            "1e400",
        ])
        .prop_map(str::to_owned),
        ".{0,10}",
    ]
}

/// A JSON number or something else where a number belongs.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..=20).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        text().prop_map(Value::from),
        Just(Value::Null),
    ]
}

fn requirement_json() -> impl Strategy<Value = Value> {
    (
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(prop::collection::vec(text(), 0..4)),
    )
        .prop_map(|(attribute, operator, values)| {
            let mut object = serde_json::Map::new();
            if let Some(a) = attribute {
                object.insert("attribute".into(), a.into());
            }
            if let Some(o) = operator {
                object.insert("operator".into(), o.into());
            }
            if let Some(v) = values {
                object.insert("values".into(), v.into());
            }
            Value::Object(object)
        })
}

fn sharing_json() -> impl Strategy<Value = Value> {
    (prop::option::of(text()), prop::option::of(number())).prop_map(|(mode, max)| {
        let mut object = serde_json::Map::new();
        if let Some(m) = mode {
            object.insert("mode".into(), m.into());
        }
        if let Some(m) = max {
            object.insert("maxConsumers".into(), m);
        }
        Value::Object(object)
    })
}

/// A spec-shaped JSON object: each known key present or not, with right or wrong values.
fn spec_json() -> impl Strategy<Value = Value> {
    (
        prop::option::of(number()),
        prop::option::of(prop::collection::vec(requirement_json(), 0..4)),
        prop::option::of(sharing_json()),
        prop::option::of(text()),
        prop::option::of(prop_oneof![any::<bool>().prop_map(Value::from), number()]),
        prop::option::of(text()),
    )
        .prop_map(|(count, selector, sharing, same, shareable, policy)| {
            let mut object = serde_json::Map::new();
            let fields = [
                ("count", count),
                ("selector", selector.map(Value::from)),
                ("sharing", sharing),
                ("sameAttribute", same.map(Value::from)),
                ("shareable", shareable),
                ("policy", policy.map(Value::from)),
            ];
            for (key, value) in fields {
                if let Some(value) = value {
                    object.insert(key.to_owned(), value);
                }
            }
            Value::Object(object)
        })
}

/// Any JSON value, for inputs that are not spec-shaped at all.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 20, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The JSON pointer of a field path such as `spec.selector[2].values[0]`.
fn pointer(field: &str) -> Option<String> {
    let rest = field.strip_prefix("spec")?;
    let mut out = String::new();
    for part in rest.split('.').skip(1) {
        let (name, indexes) = part.split_once('[').map_or((part, ""), |(n, i)| (n, i));
        out.push('/');
        out.push_str(name);
        for index in indexes.split('[') {
            let index = index.trim_end_matches(']');
            if !index.is_empty() {
                out.push('/');
                out.push_str(index);
            }
        }
    }
    Some(out)
}

/// Fails unless `error` names a field under `spec.` that `input` has, or whose parent it has.
fn names_a_field_of(error: &ParamsError, input: &Value) -> Result<(), TestCaseError> {
    let field = &error.0.field;
    let at = pointer(field)
        .ok_or_else(|| TestCaseError::fail(format!("{field:?} is not under spec.")))?;
    let parent = at.rsplit_once('/').map_or("", |(p, _)| p);
    prop_assert!(
        input.pointer(&at).is_some() || input.pointer(parent).is_some(),
        "{field} is not in {input}"
    );
    prop_assert!(!error.0.reason.is_empty(), "{error:?}");
    prop_assert!(error.to_string().starts_with(field.as_str()), "{error}");
    Ok(())
}

proptest! {
    #[test]
    fn spec_shaped_json_converts_or_names_a_field_it_has(input in spec_json()) {
        if let Ok(spec) = serde_json::from_value::<DeviceClaimParametersSpec>(input.clone()) {
            match claim_request(&spec) {
                Ok((request, _)) => prop_assert!(request.validate().is_ok()),
                Err(error) => names_a_field_of(&error, &input)?,
            }
        }
        if let Ok(spec) = serde_json::from_value::<DeviceClassParametersSpec>(input.clone()) {
            match class_defaults(&spec) {
                Ok(defaults) => prop_assert!(defaults.validate().is_ok()),
                Err(error) => names_a_field_of(&error, &input)?,
            }
        }
    }

    /// serde reads a struct from a JSON array by position, so an array can convert too; the
    /// field an error names is then checked only for objects (the CRD schema's `spec` is an
    /// object, so the API server refuses an array before the controller sees one).
    #[test]
    fn arbitrary_json_never_panics(input in any_json()) {
        if let Ok(spec) = serde_json::from_value::<DeviceClaimParametersSpec>(input.clone()) {
            if let Err(error) = claim_request(&spec) {
                if input.is_object() {
                    names_a_field_of(&error, &input)?;
                }
            }
        }
        if let Ok(spec) = serde_json::from_value::<DeviceClassParametersSpec>(input.clone()) {
            if let Err(error) = class_defaults(&spec) {
                if input.is_object() {
                    names_a_field_of(&error, &input)?;
                }
            }
        }
    }
}

/// A requirement the model accepts.
fn valid_requirement() -> impl Strategy<Value = Requirement> {
    let attribute = "[a-z][a-z0-9./-]{0,12}";
    let compared = prop_oneof![
        "-?[0-9]{1,6}",
        "[0-9]{1,4}(Ki|Mi|Gi|k|M|G|m)",
        "(0|[1-9][0-9]?)\\.(0|[1-9][0-9]?)\\.(0|[1-9][0-9]?)",
    ];
    (
        attribute,
        prop::sample::select(OPERATORS.to_vec()),
        prop::collection::vec(".{0,8}", 1..4),
        compared,
    )
        .prop_map(|(attribute, operator, values, compared)| {
            let values = match operator {
                Operator::In | Operator::NotIn => values,
                Operator::Exists | Operator::DoesNotExist => Vec::new(),
                Operator::Gt | Operator::Lt => vec![compared],
            };
            Requirement {
                attribute,
                operator,
                values,
            }
        })
}

fn valid_sharing() -> impl Strategy<Value = Option<Sharing>> {
    prop_oneof![
        Just(None),
        Just(Some(Sharing::Exclusive)),
        (1u32..).prop_map(|max_consumers| Some(Sharing::Shared { max_consumers })),
    ]
}

fn valid_claim() -> impl Strategy<Value = (ClaimRequest, bool)> {
    (
        1..=MAX_COUNT,
        prop::collection::vec(valid_requirement(), 0..4),
        valid_sharing(),
        prop::option::of("[a-z][a-z0-9.]{0,8}"),
        any::<bool>(),
    )
        .prop_map(|(count, selector, sharing, same_attribute, shareable)| {
            (
                ClaimRequest {
                    count,
                    selector,
                    sharing,
                    same_attribute,
                },
                shareable,
            )
        })
}

fn requirement_spec(r: &Requirement) -> RequirementSpec {
    RequirementSpec {
        attribute: r.attribute.clone(),
        operator: r.operator.as_str().to_owned(),
        values: r.values.clone(),
    }
}

/// The spec an operator would write for `sharing`; `Exclusive` with or without its mode.
fn sharing_spec(sharing: Option<Sharing>, explicit: bool) -> Option<SharingSpec> {
    sharing.map(|s| match s {
        Sharing::Exclusive => SharingSpec {
            mode: explicit.then(|| "Exclusive".to_owned()),
            max_consumers: None,
        },
        Sharing::Shared { max_consumers } => SharingSpec {
            mode: Some("Shared".to_owned()),
            max_consumers: Some(max_consumers),
        },
    })
}

fn claim_spec(
    request: &ClaimRequest,
    shareable: bool,
    explicit: bool,
) -> DeviceClaimParametersSpec {
    DeviceClaimParametersSpec {
        count: (explicit || request.count != 1).then_some(i64::from(request.count)),
        selector: request.selector.iter().map(requirement_spec).collect(),
        sharing: sharing_spec(request.sharing, explicit),
        same_attribute: request.same_attribute.clone(),
        shareable: (explicit || shareable).then_some(shareable),
    }
}

proptest! {
    #[test]
    fn valid_claim_specs_convert_back_to_their_model(
        (request, shareable) in valid_claim(),
        explicit in any::<bool>(),
    ) {
        let spec = claim_spec(&request, shareable, explicit);
        // Through the JSON an API server would hand over.
        let json = serde_json::to_value(&spec).unwrap();
        let parsed: DeviceClaimParametersSpec = serde_json::from_value(json).unwrap();
        prop_assert_eq!(claim_request(&parsed), Ok((request, shareable)));
    }

    #[test]
    fn valid_class_specs_convert_back_to_their_model(
        selector in prop::collection::vec(valid_requirement(), 0..4),
        spread in any::<bool>(),
        sharing in valid_sharing(),
        explicit in any::<bool>(),
    ) {
        let policy = if spread { Policy::Spread } else { Policy::Pack };
        let spec = DeviceClassParametersSpec {
            selector: selector.iter().map(requirement_spec).collect(),
            policy: (explicit || spread).then(|| format!("{policy:?}")),
            sharing: sharing_spec(sharing, explicit),
            ..DeviceClassParametersSpec::default()
        };
        let json = serde_json::to_value(&spec).unwrap();
        let parsed: DeviceClassParametersSpec = serde_json::from_value(json).unwrap();
        prop_assert_eq!(class_defaults(&parsed), Ok(ClassDefaults { selector, policy, sharing }));
    }
}

/// One way of breaking one field of a valid claim spec, with the field it must be named as.
#[derive(Clone, Debug)]
enum Defect {
    Count(i64),
    BlankAttribute(usize, String),
    Operator(usize, String),
    ValuesForExists(usize),
    NoValuesForIn(usize),
    GtValue(usize, String),
    Mode(String),
    SharedWithoutMax,
    SharedWithZero,
    ExclusiveWithMax(u32),
    BlankSameAttribute(String),
}

fn defect() -> impl Strategy<Value = Defect> {
    let index = 0..8usize;
    prop_oneof![
        prop_oneof![i64::MIN..=0, i64::from(MAX_COUNT) + 1..=i64::MAX].prop_map(Defect::Count),
        (index.clone(), "[ \t]{0,3}").prop_map(|(i, s)| Defect::BlankAttribute(i, s)),
        (index.clone(), "[a-z]{0,8}|IN|Exist").prop_map(|(i, s)| Defect::Operator(i, s)),
        index.clone().prop_map(Defect::ValuesForExists),
        index.clone().prop_map(Defect::NoValuesForIn),
        (index, "[a-z]{1,6}|[0-9]+x|").prop_map(|(i, s)| Defect::GtValue(i, s)),
        "[a-z]{0,8}|exclusive|SHARED".prop_map(Defect::Mode),
        Just(Defect::SharedWithoutMax),
        Just(Defect::SharedWithZero),
        (0u32..).prop_map(Defect::ExclusiveWithMax),
        "[ \t]{0,3}".prop_map(Defect::BlankSameAttribute),
    ]
}

/// Requirement `i` (modulo the selector's length) and its index.
fn requirement(spec: &mut DeviceClaimParametersSpec, i: usize) -> (usize, &mut RequirementSpec) {
    let i = i % spec.selector.len();
    (i, &mut spec.selector[i])
}

/// Breaks `spec` by `defect`; returns the field the error must name.
fn apply(spec: &mut DeviceClaimParametersSpec, defect: &Defect) -> String {
    if spec.selector.is_empty() {
        spec.selector.push(RequirementSpec {
            attribute: "model".into(),
            operator: "Exists".into(),
            values: Vec::new(),
        });
    }
    match defect {
        Defect::Count(count) => {
            spec.count = Some(*count);
            "spec.count".into()
        }
        Defect::BlankAttribute(i, blank) => {
            let (i, r) = requirement(spec, *i);
            r.attribute.clone_from(blank);
            format!("spec.selector[{i}].attribute")
        }
        Defect::Operator(i, operator) => {
            let (i, r) = requirement(spec, *i);
            r.operator.clone_from(operator);
            format!("spec.selector[{i}].operator")
        }
        Defect::ValuesForExists(i) => {
            let (i, r) = requirement(spec, *i);
            r.operator = "Exists".into();
            r.values = vec!["x".into()];
            format!("spec.selector[{i}].values")
        }
        Defect::NoValuesForIn(i) => {
            let (i, r) = requirement(spec, *i);
            r.operator = "NotIn".into();
            r.values.clear();
            format!("spec.selector[{i}].values")
        }
        Defect::GtValue(i, value) => {
            let (i, r) = requirement(spec, *i);
            r.operator = "Gt".into();
            r.values = vec![value.clone()];
            format!("spec.selector[{i}].values[0]")
        }
        Defect::Mode(mode) => {
            spec.sharing = Some(SharingSpec {
                mode: Some(mode.clone()),
                max_consumers: Some(2),
            });
            "spec.sharing.mode".into()
        }
        Defect::SharedWithoutMax => {
            spec.sharing = Some(SharingSpec {
                mode: Some("Shared".into()),
                max_consumers: None,
            });
            "spec.sharing.maxConsumers".into()
        }
        Defect::SharedWithZero => {
            spec.sharing = Some(SharingSpec {
                mode: Some("Shared".into()),
                max_consumers: Some(0),
            });
            "spec.sharing.maxConsumers".into()
        }
        Defect::ExclusiveWithMax(max) => {
            spec.sharing = Some(SharingSpec {
                mode: None,
                max_consumers: Some(*max),
            });
            "spec.sharing.maxConsumers".into()
        }
        Defect::BlankSameAttribute(blank) => {
            spec.same_attribute = Some(blank.clone());
            "spec.sameAttribute".into()
        }
    }
}

proptest! {
    #[test]
    fn one_broken_field_is_refused_naming_exactly_that_field(
        (request, shareable) in valid_claim(),
        defect in defect(),
    ) {
        let mut spec = claim_spec(&request, shareable, true);
        let field = apply(&mut spec, &defect);
        // A value that happens to be valid is no defect ("Exist" is not, "" is not, "12x" is not).
        prop_assume!(!matches!(&defect, Defect::Operator(_, op) if op.parse::<Operator>().is_ok()));
        let error = claim_request(&spec).expect_err("a broken spec is refused");
        prop_assert_eq!(&error.0.field, &field, "{:?}: {}", defect, error);
        let input = json!({ "spec": serde_json::to_value(&spec).unwrap() });
        names_a_field_of(&error, &input["spec"])?;
    }
}

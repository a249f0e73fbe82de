//! Unit tests of the device model: quantity and version parsing, requirement matching and
//! validation messages, and how class and claim parameters combine.

use super::*;

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn v(text: &str) -> Version {
    Version::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn quantities_parse_to_exact_milli_units() {
    let table: &[(&str, i128)] = &[
        ("0", 0),
        ("1", 1000),
        ("500m", 500),
        ("1.5", 1500),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("2k", 2_000_000),
        ("10M", 10_000_000_000),
        ("1Ki", 1_024_000),
        ("80Gi", 80 * (1 << 30) * 1000),
        ("1Gi", 1_073_741_824_000),
        ("-2", -2000),
        ("+3m", 3),
        (".5", 500),
        ("5.", 5000),
        ("0.1m", 1),
        ("-0.1m", -1),
        ("1.0000", 1000),
        ("0001", 1000),
        ("1.5Gi", 1_610_612_736_000),
        ("1E", 1_000_000_000_000_000_000_000),
    ];
    for (text, milli) in table {
        assert_eq!(q(text).milli(), *milli, "{text}");
    }
}

#[test]
fn quantities_compare_by_value() {
    assert_eq!(q("1Gi"), q("1073741824"));
    assert_eq!(q("1000m"), q("1"));
    assert_eq!(q("1k"), q("1e3"));
    assert!(q("1Ki") > q("1k"));
    assert!(q("-1") < q("500m"));
    assert!(q("79Gi") < q("80Gi"));
}

#[test]
fn quantities_print_canonically() {
    let table = [
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Ki", "1536"),
        ("1000", "1k"),
        ("1500m", "1500m"),
        ("0.5Gi", "512Mi"),
        ("1e3", "1e3"),
        ("1e-3", "1e-3"),
        ("-2k", "-2k"),
        ("0Gi", "0"),
        ("2000000k", "2G"),
    ];
    for (text, canonical) in table {
        assert_eq!(q(text).to_string(), canonical, "{text}");
    }
}

#[test]
fn malformed_quantities_are_errors() {
    for text in [
        "",
        "-",
        ".",
        "Gi",
        "1Gb",
        "1 Gi",
        "1e",
        "1e+",
        "1.2.3",
        "1ee3",
        "0x10",
        "1e9999",
        "99999999999999999999E",
        "--1",
        "1m1",
    ] {
        let err = Quantity::parse(text).expect_err(text);
        assert!(err.to_string().starts_with("invalid quantity"), "{err}");
    }
}

#[test]
fn versions_order_by_semver_precedence() {
    let ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.2.0",
        "2.0.0",
        "10.0.0",
    ];
    for pair in ordered.windows(2) {
        assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
    }
    assert_eq!(v("1.2.3+build.7"), v("1.2.3"));
    assert_eq!(v("1.2.3-rc.1+b").to_string(), "1.2.3-rc.1+b");
}

#[test]
fn versions_differing_only_in_build_metadata_are_one_set_member() {
    let set: std::collections::HashSet<Version> = [v("1.2.3+a"), v("1.2.3+b"), v("1.2.3")]
        .into_iter()
        .collect();
    assert_eq!(set.len(), 1);
}

#[test]
fn malformed_versions_are_errors() {
    for text in [
        "",
        "1",
        "1.2",
        "1.2.3.4",
        "v1.2.3",
        "01.2.3",
        "1.2.3-",
        "1.2.3-01",
        "1.2.3+",
        "1.2.3-a..b",
        "1.2.x",
        "1.2.3-é",
        "1.2.3-18446744073709551616",
        " 1.2.3",
    ] {
        assert!(Version::parse(text).is_err(), "{text}");
    }
}

fn gpu() -> Attributes {
    Device::new("gpu-0")
        .with("model", AttributeValue::String("H200".into()))
        .with("memory", AttributeValue::Quantity(q("141Gi")))
        .with("cores", AttributeValue::Int(132))
        .with("driver", AttributeValue::Version(v("550.54.15")))
        .with("mig", AttributeValue::Bool(false))
        .with("numaNodes", AttributeValue::IntSlice(vec![0, 1]))
        .with(
            "links",
            AttributeValue::StringSlice(vec!["nvlink".into(), "pcie".into()]),
        )
        .attributes
}

#[test]
fn requirements_match_by_the_attribute_kind() {
    use Operator::{DoesNotExist, Exists, Gt, In, Lt, NotIn};
    let table: &[(&str, Operator, &[&str], bool)] = &[
        ("model", In, &["H100", "H200"], true),
        ("model", In, &["h200"], false),
        ("model", NotIn, &["H100"], true),
        ("model", NotIn, &["H200"], false),
        ("memory", In, &["144384Mi"], true),
        ("memory", Gt, &["80Gi"], true),
        ("memory", Lt, &["80Gi"], false),
        ("memory", Gt, &["141Gi"], false),
        ("cores", In, &["132"], true),
        ("cores", In, &["132000m"], true),
        ("cores", Gt, &["100"], true),
        ("cores", Lt, &["1k"], true),
        ("cores", Gt, &["1.2.3"], false),
        ("driver", Gt, &["535.0.0"], true),
        ("driver", Lt, &["550.54.15-rc.1"], false),
        ("driver", In, &["550.54.15+anything"], true),
        ("mig", In, &["false"], true),
        ("mig", In, &["true"], false),
        ("mig", In, &["False"], false),
        ("mig", Gt, &["0"], false),
        ("numaNodes", In, &["1"], true),
        ("numaNodes", In, &["2"], false),
        ("links", In, &["pcie"], true),
        ("links", NotIn, &["pcie"], false),
        ("model", Exists, &[], true),
        ("model", DoesNotExist, &[], false),
        ("missing", Exists, &[], false),
        ("missing", DoesNotExist, &[], true),
        ("missing", NotIn, &["x"], true),
        ("missing", In, &["x"], false),
        ("missing", Gt, &["1"], false),
        ("missing", Lt, &["1"], false),
        ("model", Gt, &["1"], false),
    ];
    let attributes = gpu();
    for (attribute, operator, values, expected) in table {
        let r = Requirement::new(*attribute, *operator, values);
        assert_eq!(r.matches(&attributes), *expected, "{r}");
    }
}

#[test]
fn requirement_validation_names_the_field_and_reason() {
    use Operator::{DoesNotExist, Exists, Gt, In, Lt, NotIn};
    let table: &[(&str, Operator, &[&str], Option<&str>)] = &[
        ("model", In, &["H200"], None),
        (
            "model",
            In,
            &[],
            Some("sel[0].values: operator In needs at least one value"),
        ),
        (
            "model",
            NotIn,
            &[],
            Some("sel[0].values: operator NotIn needs at least one value"),
        ),
        (
            "model",
            Exists,
            &["x", "y"],
            Some("sel[0].values: operator Exists takes no values, got 2"),
        ),
        ("model", DoesNotExist, &[], None),
        ("memory", Gt, &["80Gi"], None),
        ("driver", Lt, &["1.2.3"], None),
        (
            "memory",
            Gt,
            &[],
            Some("sel[0].values: operator Gt needs exactly one value, got 0"),
        ),
        (
            "memory",
            Lt,
            &["1", "2"],
            Some("sel[0].values: operator Lt needs exactly one value, got 2"),
        ),
        (
            "memory",
            Gt,
            &["big"],
            Some("sel[0].values[0]: \"big\" is not a number, quantity or version"),
        ),
        ("", Exists, &[], Some("sel[0].attribute: must not be empty")),
    ];
    for (attribute, operator, values, expected) in table {
        let result = Requirement::new(*attribute, *operator, values).validate("sel[0]");
        assert_eq!(result.err().map(|e| e.to_string()).as_deref(), *expected);
    }
}

#[test]
fn unknown_operator_is_a_parse_error() {
    assert_eq!("Gt".parse::<Operator>(), Ok(Operator::Gt));
    let err = "Between".parse::<Operator>().unwrap_err();
    assert!(
        err.to_string().contains("unknown operator \"Between\""),
        "{err}"
    );
}

#[test]
fn claim_validation_reports_count_sharing_and_selector_fields() {
    let bad_count = ClaimRequest {
        count: 0,
        ..ClaimRequest::default()
    };
    assert_eq!(
        bad_count.validate().unwrap_err().to_string(),
        "spec.count: must be between 1 and 16, got 0"
    );
    let too_many = ClaimRequest {
        count: 17,
        ..ClaimRequest::default()
    };
    assert_eq!(too_many.validate().unwrap_err().field, "spec.count");
    let no_consumers = ClaimRequest {
        sharing: Some(Sharing::Shared { max_consumers: 0 }),
        ..ClaimRequest::default()
    };
    assert_eq!(
        no_consumers.validate().unwrap_err().to_string(),
        "spec.sharing.maxConsumers: must be at least 1, got 0"
    );
    let bad_selector = ClaimRequest {
        selector: vec![
            Requirement::new("model", Operator::Exists, &[]),
            Requirement::new("memory", Operator::Gt, &[]),
        ],
        ..ClaimRequest::default()
    };
    assert_eq!(
        bad_selector.validate().unwrap_err().field,
        "spec.selector[1].values"
    );
    let empty_same = ClaimRequest {
        same_attribute: Some(String::new()),
        ..ClaimRequest::default()
    };
    assert_eq!(
        empty_same.validate().unwrap_err().field,
        "spec.sameAttribute"
    );
    assert_eq!(ClaimRequest::default().validate(), Ok(()));
}

#[test]
fn effective_request_concatenates_selectors_and_resolves_sharing() {
    let class = ClassDefaults {
        selector: vec![Requirement::new("vendor", Operator::In, &["nvidia"])],
        policy: Policy::Spread,
        sharing: Some(Sharing::Shared { max_consumers: 4 }),
    };
    let claim = ClaimRequest {
        count: 2,
        selector: vec![Requirement::new("model", Operator::In, &["H200"])],
        sharing: None,
        same_attribute: Some("numa".into()),
    };
    let effective = EffectiveRequest::combine(&class, &claim).unwrap();
    assert_eq!(effective.count, 2);
    assert_eq!(
        effective.selector_text(),
        "vendor In [nvidia], model In [H200]"
    );
    assert_eq!(effective.sharing, Sharing::Shared { max_consumers: 4 });
    assert_eq!(effective.policy, Policy::Spread);
    assert_eq!(effective.same_attribute.as_deref(), Some("numa"));

    let own = ClaimRequest {
        sharing: Some(Sharing::Exclusive),
        ..claim.clone()
    };
    assert_eq!(
        EffectiveRequest::combine(&class, &own).unwrap().sharing,
        Sharing::Exclusive
    );
    let plain = EffectiveRequest::combine(&ClassDefaults::default(), &ClaimRequest::default());
    assert_eq!(plain.unwrap().sharing, Sharing::Exclusive);
    assert_eq!(
        EffectiveRequest::from_class(&class).unwrap().sharing,
        Sharing::Exclusive
    );
}

#[test]
fn invalid_class_fails_the_combination() {
    let class = ClassDefaults {
        selector: vec![Requirement::new("model", Operator::In, &[])],
        ..ClassDefaults::default()
    };
    let err = EffectiveRequest::combine(&class, &ClaimRequest::default()).unwrap_err();
    assert_eq!(err.field, "spec.selector[0].values");
}

#[test]
fn parameters_round_trip_through_json_in_camel_case() {
    let json = r#"{"count":2,"selector":[{"attribute":"memory","operator":"Gt","values":["40Gi"]}],
        "sharing":{"shared":{"maxConsumers":3}},"sameAttribute":"numa"}"#;
    let claim: ClaimRequest = serde_json::from_str(json).unwrap();
    assert_eq!(claim.sharing, Some(Sharing::Shared { max_consumers: 3 }));
    assert_eq!(claim.same_attribute.as_deref(), Some("numa"));
    let back: ClaimRequest = serde_json::from_str(&serde_json::to_string(&claim).unwrap()).unwrap();
    assert_eq!(back, claim);
    let defaults: ClaimRequest = serde_json::from_str("{}").unwrap();
    assert_eq!(defaults.count, 1);
    assert!(serde_json::from_str::<Requirement>(
        r#"{"attribute":"a","operator":"Between","values":[]}"#
    )
    .is_err());
}

#[test]
fn device_attributes_round_trip_through_postcard_and_json() {
    let device = Device {
        name: "gpu-0".into(),
        attributes: gpu(),
    };
    let bytes = postcard::to_allocvec(&device).unwrap();
    assert_eq!(postcard::from_bytes::<Device>(&bytes).unwrap(), device);
    let json = serde_json::to_string(&device).unwrap();
    assert!(json.contains(r#""memory":{"quantity":"141Gi"}"#), "{json}");
    assert_eq!(serde_json::from_str::<Device>(&json).unwrap(), device);
}

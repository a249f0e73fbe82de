//! The CEL coverage of device selectors, tested expression by expression: every row of
//! `COVERED` must evaluate to true for the test device, every row of `NOT_AVAILABLE` must fail.
//! `docs/simulator.md` ("CEL in the 1.34 scheduler") lists the same functions.

// Every expression of the tables is a raw string, quotes or not, so that rows read alike.
#![allow(clippy::needless_raw_string_hashes)]

use super::*;
use dra_types::resource_v1::DeviceCapacity;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Amount;

const DRIVER: &str = "gpu.example.com";

/// A device of `gpu.example.com`: bare `model`, `numa`, `driverVersion`, `memory`, and a
/// qualified `other.example.com/flag`.
fn device() -> DeviceValue {
    let device = Device {
        name: "gpu-0".into(),
        attributes: [
            ("model", DeviceAttribute::String("H100".into())),
            ("numa", DeviceAttribute::Int(1)),
            ("driverVersion", DeviceAttribute::Version("1.2.3".into())),
            ("other.example.com/flag", DeviceAttribute::Bool(true)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
        capacity: [(
            "memory".to_owned(),
            DeviceCapacity::new(Amount("80Gi".into())),
        )]
        .into(),
        ..Device::default()
    };
    DeviceValue::new(DRIVER, &device).unwrap()
}

/// Compiles and evaluates `expression` on [`device`]; the error is the compiler's or the
/// evaluation's text.
fn eval(env: &CelEnv, expression: &str) -> Result<bool, String> {
    let program = env.compile(expression).map_err(|e| e.to_string())?;
    env.matches(&program, &device()).map_err(|e| e.to_string())
}

/// `(library, expression)`: each must be true.
const COVERED: &[(&str, &str)] = &[
    // the device variable
    ("device", r#"device.driver == "gpu.example.com""#),
    (
        "device",
        r#"device.attributes["gpu.example.com"].model == "H100""#,
    ),
    ("device", r#"device.attributes["other.example.com"].flag"#),
    (
        "device",
        r#"!("model" in device.attributes["none.example.com"])"#,
    ),
    (
        "device",
        r#"size(device.attributes["none.example.com"]) == 0"#,
    ),
    ("device", r#""gpu.example.com" in device.attributes"#),
    (
        "device",
        r#"has(device.attributes["gpu.example.com"].model)"#,
    ),
    (
        "device",
        r#"!has(device.attributes["gpu.example.com"].missing)"#,
    ),
    (
        "device",
        r#"size(device.attributes["gpu.example.com"]) == 3"#,
    ),
    (
        "device",
        r#"device.attributes["gpu.example.com"].numa + 1 == 2"#,
    ),
    // standard library: operators, macros, conversions, strings, time
    (
        "standard",
        r#"device.driver == "x" && device.attributes["x"].model == "y" || true"#,
    ),
    (
        "standard",
        r#"!(false && device.attributes["gpu.example.com"].missing)"#,
    ),
    ("standard", r#"true ? true : false"#),
    (
        "standard",
        r#"["H100", "A100"].exists(m, m == device.attributes["gpu.example.com"].model)"#,
    ),
    ("standard", r#"[1, 2].all(x, x > 0)"#),
    ("standard", r#"[1, 2].exists_one(x, x > 1)"#),
    ("standard", r#"[1, 2].map(x, x * 2) == [2, 4]"#),
    ("standard", r#"[1, 2].filter(x, x > 1) == [2]"#),
    ("standard", r#"2 in [1, 2]"#),
    ("standard", r#"{"a": 1}["a"] == 1"#),
    ("standard", r#"size("abc") == 3 && "abc".size() == 3"#),
    (
        "standard",
        r#""H100".startsWith("H") && "H100".endsWith("00") && "H100".contains("10")"#,
    ),
    ("standard", r#""H100".matches("^H[0-9]+$")"#),
    (
        "standard",
        r#"int("3") == 3 && uint(3) == 3u && double(1) == 1.0 && string(1) == "1""#,
    ),
    (
        "standard",
        r#"bool("true") && bytes("a") == b"a" && type(1) == int && dyn(1) == 1"#,
    ),
    ("standard", r#"1 < 2.0 && 1u < 2 && 1.5 > 1"#),
    (
        "standard",
        r#"timestamp("2024-01-01T00:00:00Z") < timestamp("2025-01-01T00:00:00Z")"#,
    ),
    (
        "standard",
        r#"duration("1h") > duration("59m") && duration("1h").getMinutes() == 60"#,
    ),
    // optional values
    (
        "optional",
        r#"device.attributes["gpu.example.com"].?model.hasValue()"#,
    ),
    (
        "optional",
        r#"!device.attributes["gpu.example.com"].?missing.hasValue()"#,
    ),
    (
        "optional",
        r#"device.attributes["gpu.example.com"].?missing.orValue("none") == "none""#,
    ),
    (
        "optional",
        r#"optional.of(1).value() == 1 && !optional.none().hasValue()"#,
    ),
    // strings extension
    (
        "strings",
        r#""ABC".lowerAscii() == "abc" && "abc".upperAscii() == "ABC""#,
    ),
    (
        "strings",
        r#""a,b".split(",") == ["a", "b"] && ["a", "b"].join("-") == "a-b""#,
    ),
    (
        "strings",
        r#""abcb".indexOf("b") == 1 && "abcb".lastIndexOf("b") == 3"#,
    ),
    (
        "strings",
        r#""abc".replace("b", "x") == "axc" && " a ".trim() == "a""#,
    ),
    (
        "strings",
        r#""abc".substring(1) == "bc" && "abc".charAt(1) == "b""#,
    ),
    (
        "strings",
        r#"strings.quote("a") == "\"a\"" && "%d-%s".format([1, "x"]) == "1-x""#,
    ),
    // lists extension
    (
        "lists",
        r#"[1, 2, 3].slice(1, 2) == [2] && [[1], [2]].flatten() == [1, 2]"#,
    ),
    (
        "lists",
        r#"[1, 1, 2].distinct() == [1, 2] && [1, 2].reverse() == [2, 1]"#,
    ),
    (
        "lists",
        r#"[2, 1].sort() == [1, 2] && [2, 1].sortBy(x, x) == [1, 2]"#,
    ),
    ("lists", r#"lists.range(3) == [0, 1, 2]"#),
    // quantity (added here)
    (
        "quantity",
        r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
    ),
    (
        "quantity",
        r#"quantity("80Gi").isGreaterThan(quantity("40Gi"))"#,
    ),
    (
        "quantity",
        r#"quantity("1000Mi").isLessThan(quantity("1Gi"))"#,
    ),
    (
        "quantity",
        r#"quantity("1Gi") == quantity("1024Mi") && quantity("1k") != quantity("1Ki")"#,
    ),
    (
        "quantity",
        r#"quantity("1Gi").compareTo(quantity("1G")) == 1"#,
    ),
    (
        "quantity",
        r#"quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")"#,
    ),
    (
        "quantity",
        r#"quantity("1Gi").sub(1) == quantity("1073741823") && quantity("1").add(1) == quantity("2")"#,
    ),
    (
        "quantity",
        r#"quantity("2k").asInteger() == 2000 && quantity("500m").asApproximateFloat() == 0.5"#,
    ),
    (
        "quantity",
        r#"quantity("-1").sign() == -1 && quantity("0").sign() == 0"#,
    ),
    (
        "quantity",
        r#"quantity("1").isInteger() && !quantity("1500m").isInteger()"#,
    ),
    ("quantity", r#"isQuantity("80Gi") && !isQuantity("80GB")"#),
    // semver (added here)
    (
        "semver",
        r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))"#,
    ),
    (
        "semver",
        r#"device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.10.0"))"#,
    ),
    (
        "semver",
        r#"device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")"#,
    ),
    (
        "semver",
        r#"semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3"#,
    ),
    (
        "semver",
        r#"semver("1.0.0").compareTo(semver("1.0.0-rc.1")) == 1"#,
    ),
    ("semver", r#"semver("v1.0", true) == semver("1.0.0")"#),
    (
        "semver",
        r#"isSemver("1.2.3") && !isSemver("v1.2") && isSemver("v1.2", true)"#,
    ),
];

/// Kubernetes CEL functions the environment does not have: each fails to compile or to
/// evaluate.
const NOT_AVAILABLE: &[(&str, &str)] = &[
    ("bindings", "cel.bind(x, 1, x == 1)"),
    ("two-variable comprehensions", "[1].all(i, v, v > 0)"),
    (
        "two-variable comprehensions",
        "[1].transformList(i, v, v) == [1]",
    ),
    ("sets", "sets.contains([1, 2], [1])"),
    ("sets", "sets.equivalent([1], [1])"),
    ("sets", "sets.intersects([1], [1])"),
    ("kubernetes lists", "[1, 2].isSorted()"),
    ("kubernetes lists", "[1, 2].sum() == 3"),
    ("kubernetes lists", "[1, 2].min() == 1"),
    ("kubernetes lists", "[1, 2].max() == 2"),
    ("kubernetes lists", "[1, 2].indexOf(2) == 1"),
    ("kubernetes lists", "[1, 2].lastIndexOf(2) == 1"),
    ("lists v3", "[1, 2].first().value() == 1"),
    ("lists v3", "[1, 2].last().value() == 2"),
    ("regex", r#""abc".find("b") == "b""#),
    ("regex", r#""abc".findAll("b") == ["b"]"#),
    (
        "urls",
        r#"url("https://example.com").getHost() == "example.com""#,
    ),
    ("urls", r#"isURL("https://example.com")"#),
    (
        "urls",
        r#"url("https://example.com:80/p?q=1").getScheme() == "https""#,
    ),
    (
        "urls",
        r#"url("https://example.com:80/p").getHostname() == "example.com""#,
    ),
    (
        "urls",
        r#"url("https://example.com:80/p").getPort() == "80""#,
    ),
    (
        "urls",
        r#"url("https://example.com/p").getEscapedPath() == "/p""#,
    ),
    (
        "urls",
        r#"url("https://example.com/p?q=1").getQuery() == {"q": ["1"]}"#,
    ),
    ("ip", r#"ip("10.0.0.1").family() == 4"#),
    ("ip", r#"isIP("10.0.0.1")"#),
    ("ip", r#"ip("10.0.0.1").isLoopback() == false"#),
    ("cidr", r#"cidr("10.0.0.0/8").containsIP("10.0.0.1")"#),
    ("cidr", r#"cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")"#),
    ("cidr", r#"isCIDR("10.0.0.0/8")"#),
    (
        "format",
        r#"!format.dns1123Label().validate("a").hasValue()"#,
    ),
];

#[test]
fn every_covered_function_evaluates_for_a_device() {
    let env = CelEnv::new();
    let failures: Vec<String> = COVERED
        .iter()
        .filter_map(|(library, expression)| match eval(&env, expression) {
            Ok(true) => None,
            other => Some(format!("{library}: {expression}: {other:?}")),
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_function_listed_as_not_available_fails() {
    let env = CelEnv::new();
    let working: Vec<&str> = NOT_AVAILABLE
        .iter()
        .filter(|(_, expression)| eval(&env, expression).is_ok())
        .map(|(_, expression)| *expression)
        .collect();
    assert!(working.is_empty(), "now available: {working:?}");
}

#[test]
fn a_bare_and_a_qualified_attribute_name_are_the_same_attribute() {
    let env = CelEnv::new();
    assert_eq!(
        eval(
            &env,
            r#"device.attributes["gpu.example.com"].model == "H100""#
        ),
        Ok(true)
    );
    let qualified = Device {
        name: "d".into(),
        attributes: [(
            "gpu.example.com/model".to_owned(),
            DeviceAttribute::String("H100".into()),
        )]
        .into(),
        ..Device::default()
    };
    let program = env
        .compile(r#"device.attributes["gpu.example.com"].model == "H100""#)
        .unwrap();
    assert!(matches!(
        env.matches(&program, &DeviceValue::new(DRIVER, &qualified).unwrap()),
        Ok(true)
    ));
}

#[test]
fn a_missing_attribute_is_a_runtime_error_unless_guarded() {
    let env = CelEnv::new();
    assert_eq!(
        eval(&env, r#"device.attributes["gpu.example.com"].missing == 1"#),
        Err("no such key: missing".to_owned())
    );
    assert_eq!(
        eval(
            &env,
            r#""missing" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].missing == 1"#
        ),
        Ok(false)
    );
}

#[test]
fn a_syntax_error_fails_to_compile_and_is_cached() {
    let env = CelEnv::new();
    let error = env.compile("device.driver ==").unwrap_err();
    assert!(
        error.to_string().starts_with("compilation failed: "),
        "{error:?}"
    );
    let again = env.compile("device.driver ==").unwrap_err();
    assert!(
        std::sync::Arc::ptr_eq(&again.source, &error.source),
        "the kept error"
    );
}

#[test]
fn a_result_that_is_not_a_bool_is_a_runtime_error() {
    let env = CelEnv::new();
    assert_eq!(
        eval(&env, "device.driver"),
        Err("CEL result of type string could not be converted to bool".to_owned())
    );
    assert!(eval(&env, r#"quantity("1x") == quantity("1")"#)
        .unwrap_err()
        .contains("quantities must match the regular expression"));
}

#[test]
fn a_version_attribute_that_is_no_semver_makes_the_device_unusable() {
    let device = Device {
        name: "d".into(),
        attributes: [("v".to_owned(), DeviceAttribute::Version("one".into()))].into(),
        ..Device::default()
    };
    let error = DeviceValue::new(DRIVER, &device).unwrap_err().to_string();
    assert!(
        error.starts_with("attribute v: parse semantic version"),
        "{error}"
    );
}

#[test]
fn verdicts_are_kept_per_expression_and_device_content() {
    let env = CelEnv::new();
    let h100 = Device {
        name: "gpu-0".into(),
        attributes: [("model".to_owned(), DeviceAttribute::String("H100".into()))].into(),
        ..Device::default()
    };
    let mut a100 = h100.clone();
    a100.attributes
        .insert("model".into(), DeviceAttribute::String("A100".into()));
    let is_h100 = r#"device.attributes["gpu.example.com"].model == "H100""#;
    let evaluations = std::cell::Cell::new(0);
    let verdict = |device: &Device, expression: &str| {
        env.verdict(&device_key(DRIVER, device), expression, || {
            evaluations.set(evaluations.get() + 1);
            let program = env.compile(expression).unwrap();
            let value = DeviceValue::new(DRIVER, device).unwrap();
            env.matches(&program, &value)
        })
        .map_err(|e| e.to_string())
    };
    assert_eq!(verdict(&h100, is_h100), Ok(true));
    assert_eq!(verdict(&h100, is_h100), Ok(true));
    assert_eq!(evaluations.get(), 1, "the second verdict is the kept one");
    assert_eq!(
        verdict(&a100, is_h100),
        Ok(false),
        "a device of other content"
    );
    let missing = r#"device.attributes["gpu.example.com"].vendor == "x""#;
    assert_eq!(verdict(&h100, missing), Err("no such key: vendor".into()));
    assert_eq!(verdict(&h100, missing), Err("no such key: vendor".into()));
    assert_eq!(evaluations.get(), 3);
    assert_ne!(
        device_key(DRIVER, &h100),
        device_key("other.example.com", &h100)
    );
}

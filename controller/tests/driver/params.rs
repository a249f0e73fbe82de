//! The driver's pure parts: parameter conversion (every invalid field named), the checked-in CRD
//! manifests, the resource handle data format, `ResourceSlice` conversion and the "no node fits"
//! explanation.

use dra_allocator::fit::UnsuitableNode;
use dra_allocator::model::{
    AttributeValue, Operator, Policy, Quantity, Requirement, Sharing, Version,
};
use dra_controller::driver::explain_unsuitable;
use dra_controller::driver::handle::{
    allocation_result, claim_allocation, ClaimAllocationState, HandleData, HandleSharing,
};
use dra_controller::driver::inventory::{attribute_value, devices_by_node};
use dra_controller::params::{
    claim_request, class_defaults, crd_manifests, DeviceClaimParametersSpec,
    DeviceClassParametersSpec, RequirementSpec, SharingSpec,
};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, NamedResourcesAttribute, NamedResourcesInstance, NamedResourcesIntSlice,
    NamedResourcesResources, NamedResourcesStringSlice, ResourceClaim, ResourceClaimSpec,
    ResourceClaimStatus, ResourceHandle, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn req(attribute: &str, operator: &str, values: &[&str]) -> RequirementSpec {
    RequirementSpec {
        attribute: attribute.into(),
        operator: operator.into(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

fn shared(max: Option<u32>) -> SharingSpec {
    SharingSpec {
        mode: Some("Shared".into()),
        max_consumers: max,
    }
}

#[test]
fn valid_claim_parameters_convert_to_the_model() {
    let spec = DeviceClaimParametersSpec {
        count: Some(2),
        selector: vec![
            req("model", "In", &["H200"]),
            req("memory", "Gt", &["40Gi"]),
        ],
        sharing: Some(shared(Some(4))),
        same_attribute: Some("numa".into()),
        shareable: Some(true),
    };
    let (request, shareable) = claim_request(&spec).expect("valid");
    assert!(shareable);
    assert_eq!(request.count, 2);
    assert_eq!(request.sharing, Some(Sharing::Shared { max_consumers: 4 }));
    assert_eq!(request.same_attribute.as_deref(), Some("numa"));
    assert_eq!(
        request.selector,
        vec![
            Requirement::new("model", Operator::In, &["H200"]),
            Requirement::new("memory", Operator::Gt, &["40Gi"]),
        ]
    );
}

#[test]
fn empty_claim_parameters_mean_one_device_not_shareable() {
    let (request, shareable) = claim_request(&DeviceClaimParametersSpec::default()).unwrap();
    assert_eq!(request.count, 1);
    assert_eq!(request.sharing, None);
    assert!(request.selector.is_empty());
    assert!(!shareable);
}

#[test]
#[allow(clippy::too_many_lines)] // one data table
fn each_invalid_claim_field_is_named_in_the_error() {
    let base = DeviceClaimParametersSpec::default;
    let cases: Vec<(DeviceClaimParametersSpec, &str, &str)> = vec![
        (
            DeviceClaimParametersSpec {
                count: Some(0),
                ..base()
            },
            "spec.count",
            "got 0",
        ),
        (
            DeviceClaimParametersSpec {
                count: Some(17),
                ..base()
            },
            "spec.count",
            "got 17",
        ),
        (
            DeviceClaimParametersSpec {
                count: Some(-3),
                ..base()
            },
            "spec.count",
            "got -3",
        ),
        (
            DeviceClaimParametersSpec {
                selector: vec![req("model", "Matches", &["x"])],
                ..base()
            },
            "spec.selector[0].operator",
            "Matches",
        ),
        (
            DeviceClaimParametersSpec {
                selector: vec![req("model", "In", &["a"]), req("", "Exists", &[])],
                ..base()
            },
            "spec.selector[1].attribute",
            "empty",
        ),
        (
            DeviceClaimParametersSpec {
                selector: vec![req("model", "In", &[])],
                ..base()
            },
            "spec.selector[0].values",
            "at least one",
        ),
        (
            DeviceClaimParametersSpec {
                selector: vec![req("memory", "Gt", &["lots"])],
                ..base()
            },
            "spec.selector[0].values[0]",
            "\"lots\"",
        ),
        (
            DeviceClaimParametersSpec {
                selector: vec![req("numa", "Exists", &["0"])],
                ..base()
            },
            "spec.selector[0].values",
            "no values",
        ),
        (
            DeviceClaimParametersSpec {
                sharing: Some(shared(Some(0))),
                ..base()
            },
            "spec.sharing.maxConsumers",
            "at least 1",
        ),
        (
            DeviceClaimParametersSpec {
                sharing: Some(shared(None)),
                ..base()
            },
            "spec.sharing.maxConsumers",
            "required",
        ),
        (
            DeviceClaimParametersSpec {
                sharing: Some(SharingSpec {
                    mode: Some("Sometimes".into()),
                    max_consumers: None,
                }),
                ..base()
            },
            "spec.sharing.mode",
            "Sometimes",
        ),
        (
            DeviceClaimParametersSpec {
                same_attribute: Some(" ".into()),
                ..base()
            },
            "spec.sameAttribute",
            "empty",
        ),
    ];
    for (spec, field, detail) in cases {
        let error = claim_request(&spec).expect_err(field);
        assert_eq!(error.0.field, field, "{spec:?}");
        let text = error.to_string();
        assert!(text.starts_with(&format!("{field}: ")), "{text}");
        assert!(text.contains(detail), "{text} should mention {detail}");
    }
}

#[test]
fn class_parameters_convert_with_pack_as_the_default_policy() {
    let defaults = class_defaults(&DeviceClassParametersSpec::default()).unwrap();
    assert_eq!(defaults.policy, Policy::Pack);
    let spread = class_defaults(&DeviceClassParametersSpec {
        selector: vec![req("model", "In", &["H100", "H200"])],
        policy: Some("Spread".into()),
        sharing: Some(SharingSpec {
            mode: Some("Exclusive".into()),
            max_consumers: None,
        }),
        ..DeviceClassParametersSpec::default()
    })
    .unwrap();
    assert_eq!(spread.policy, Policy::Spread);
    assert_eq!(spread.sharing, Some(Sharing::Exclusive));
    assert_eq!(spread.selector.len(), 1);
}

#[test]
fn each_invalid_class_field_is_named_in_the_error() {
    let base = DeviceClassParametersSpec::default;
    let cases: Vec<(DeviceClassParametersSpec, &str)> = vec![
        (
            DeviceClassParametersSpec {
                policy: Some("Random".into()),
                ..base()
            },
            "spec.policy",
        ),
        (
            DeviceClassParametersSpec {
                selector: vec![req("model", "Like", &["H"])],
                ..base()
            },
            "spec.selector[0].operator",
        ),
        (
            DeviceClassParametersSpec {
                sharing: Some(shared(Some(0))),
                ..base()
            },
            "spec.sharing.maxConsumers",
        ),
        (
            DeviceClassParametersSpec {
                sharing: Some(SharingSpec {
                    mode: Some("Exclusive".into()),
                    max_consumers: Some(2),
                }),
                ..base()
            },
            "spec.sharing.maxConsumers",
        ),
    ];
    for (spec, field) in cases {
        let error = class_defaults(&spec).expect_err(field);
        assert_eq!(error.0.field, field, "{spec:?}");
    }
}

#[test]
fn checked_in_crds_match_the_generated_manifests() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/crds.yaml");
    let generated = crd_manifests();
    if std::env::var_os("UPDATE_CRDS").is_some() {
        std::fs::write(path, &generated).expect("write deploy/base/crds.yaml");
    }
    let checked_in = std::fs::read_to_string(path).expect("deploy/base/crds.yaml exists");
    assert_eq!(
        checked_in, generated,
        "deploy/base/crds.yaml is out of date: run `dra-ledger crds > deploy/base/crds.yaml` \
         (or UPDATE_CRDS=1 cargo test -p dra-controller --test driver params::)"
    );
}

#[test]
fn generated_crds_describe_both_parameter_kinds_with_their_scopes() {
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&crd_manifests())
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2);
    let names: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap(),
                d["spec"]["scope"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("deviceclassparameters.dra-ledger.io", "Cluster"),
            ("deviceclaimparameters.dra-ledger.io", "Namespaced"),
        ]
    );
    let claim_spec = &docs[1]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"];
    for field in ["count", "selector", "sharing", "sameAttribute", "shareable"] {
        assert!(!claim_spec[field].is_null(), "claim spec has {field}");
    }
}

fn data() -> HandleData {
    HandleData {
        node: "node-3".into(),
        devices: vec!["gpu-1".into(), "gpu-0".into()],
        sharing: HandleSharing::Shared { max_consumers: 2 },
        claim_uid: "uid-1".into(),
    }
}

#[test]
fn handle_data_round_trips_in_the_spec_format() {
    let text = data().to_json();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "node": "node-3",
            "devices": ["gpu-1", "gpu-0"],
            "sharing": {"mode": "Shared", "maxConsumers": 2},
            "claimUID": "uid-1",
        })
    );
    assert_eq!(HandleData::parse(&text).unwrap(), data());
    let exclusive = HandleData {
        sharing: HandleSharing::Exclusive,
        ..data()
    };
    assert_eq!(HandleData::parse(&exclusive.to_json()).unwrap(), exclusive);
    assert_eq!(Sharing::from(HandleSharing::Exclusive), Sharing::Exclusive);
}

#[test]
fn malformed_handle_data_is_rejected_with_a_reason() {
    let cases = [
        ("", "EOF"),
        ("not json", "expected"),
        (r#"{"node":"n","devices":["a"],"claimUID":"u"}"#, "sharing"),
        (
            r#"{"node":"","devices":["a"],"sharing":{"mode":"Exclusive"},"claimUID":"u"}"#,
            "node",
        ),
        (
            r#"{"node":"n","devices":[],"sharing":{"mode":"Exclusive"},"claimUID":"u"}"#,
            "devices",
        ),
        (
            r#"{"node":"n","devices":["a","a"],"sharing":{"mode":"Exclusive"},"claimUID":"u"}"#,
            "twice",
        ),
        (
            r#"{"node":"n","devices":["a"],"sharing":{"mode":"Exclusive"},"claimUID":""}"#,
            "claimUID",
        ),
        (
            r#"{"node":"n","devices":["a"],"sharing":{"mode":"Shared","maxConsumers":0},"claimUID":"u"}"#,
            "maxConsumers",
        ),
        (
            r#"{"node":"n","devices":["a"],"sharing":{"mode":"Some"},"claimUID":"u"}"#,
            "variant",
        ),
        (
            r#"{"node":7,"devices":["a"],"sharing":{"mode":"Exclusive"},"claimUID":"u"}"#,
            "invalid type",
        ),
    ];
    for (text, reason) in cases {
        let error = HandleData::parse(text).expect_err(text).to_string();
        assert!(error.contains(reason), "{text}: {error}");
    }
}

fn claim_with(
    uid: &str,
    driver: Option<&str>,
    allocation: Option<AllocationResult>,
) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some("c".into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: Some(ResourceClaimStatus {
            allocation,
            driver_name: driver.map(Into::into),
            ..ResourceClaimStatus::default()
        }),
    }
}

#[test]
fn allocation_result_has_one_handle_a_node_selector_and_shareable() {
    let result = allocation_result("gpu.dra-ledger.io", &data(), true);
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["shareable"], true);
    assert_eq!(json["resourceHandles"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["resourceHandles"][0]["driverName"],
        "gpu.dra-ledger.io"
    );
    assert_eq!(
        json["availableOnNodes"]["nodeSelectorTerms"][0]["matchFields"][0],
        serde_json::json!({"key": "metadata.name", "operator": "In", "values": ["node-3"]})
    );
    let claim = claim_with("uid-1", Some("gpu.dra-ledger.io"), Some(result));
    assert_eq!(
        claim_allocation(&claim, "gpu.dra-ledger.io").unwrap(),
        ClaimAllocationState::Ours(data())
    );
}

#[test]
fn claim_allocation_tells_ours_from_others_and_rejects_bad_handles() {
    let ours = allocation_result("d", &data(), false);
    assert_eq!(
        claim_allocation(&claim_with("uid-1", None, None), "d").unwrap(),
        ClaimAllocationState::Unallocated
    );
    assert_eq!(
        claim_allocation(&claim_with("uid-1", Some("other"), Some(ours.clone())), "d").unwrap(),
        ClaimAllocationState::OtherDriver
    );
    let wrong_uid = claim_allocation(&claim_with("uid-2", Some("d"), Some(ours.clone())), "d");
    assert!(wrong_uid
        .unwrap_err()
        .to_string()
        .contains("does not match"));
    let mut garbled = ours;
    garbled.resource_handles = Some(vec![ResourceHandle {
        driver_name: Some("d".into()),
        data: Some("{broken".into()),
        structured_data: None,
    }]);
    assert!(claim_allocation(&claim_with("uid-1", Some("d"), Some(garbled)), "d").is_err());
    let none = AllocationResult {
        resource_handles: None,
        ..AllocationResult::default()
    };
    let error = claim_allocation(&claim_with("uid-1", Some("d"), Some(none)), "d")
        .unwrap_err()
        .to_string();
    assert!(error.contains("found 0"), "{error}");
}

fn attr(name: &str, set: impl FnOnce(&mut NamedResourcesAttribute)) -> NamedResourcesAttribute {
    let mut a = NamedResourcesAttribute {
        name: name.into(),
        ..NamedResourcesAttribute::default()
    };
    set(&mut a);
    a
}

#[test]
fn every_attribute_kind_of_a_slice_converts() {
    let cases = [
        (
            attr("b", |a| a.bool = Some(true)),
            AttributeValue::Bool(true),
        ),
        (attr("i", |a| a.int = Some(-4)), AttributeValue::Int(-4)),
        (
            attr("is", |a| {
                a.int_slice = Some(NamedResourcesIntSlice { ints: vec![1, 2] });
            }),
            AttributeValue::IntSlice(vec![1, 2]),
        ),
        (
            attr("q", |a| a.quantity = Some(KubeQuantity("80Gi".into()))),
            AttributeValue::Quantity(Quantity::parse("80Gi").unwrap()),
        ),
        (
            attr("s", |a| a.string = Some("H200".into())),
            AttributeValue::String("H200".into()),
        ),
        (
            attr("ss", |a| {
                a.string_slice = Some(NamedResourcesStringSlice {
                    strings: vec!["x".into()],
                });
            }),
            AttributeValue::StringSlice(vec!["x".into()]),
        ),
        (
            attr("v", |a| a.version = Some("1.2.3".into())),
            AttributeValue::Version(Version::parse("1.2.3").unwrap()),
        ),
    ];
    for (attribute, expected) in cases {
        assert_eq!(
            attribute_value(&attribute).unwrap(),
            expected,
            "{}",
            attribute.name
        );
    }
    assert!(attribute_value(&attr("none", |_| {})).is_err());
    assert!(attribute_value(&attr("two", |a| {
        a.int = Some(1);
        a.bool = Some(false);
    }))
    .unwrap_err()
    .to_string()
    .contains("2 values"));
    assert!(
        attribute_value(&attr("q", |a| a.quantity = Some(KubeQuantity("80Gx".into())))).is_err()
    );
}

fn slice(name: &str, driver: &str, node: &str, devices: &[&str]) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        driver_name: driver.into(),
        node_name: Some(node.into()),
        named_resources: Some(NamedResourcesResources {
            instances: devices
                .iter()
                .map(|d| NamedResourcesInstance {
                    name: (*d).into(),
                    attributes: Some(vec![
                        attr("model", |a| a.string = Some("H100".into())),
                        attr("driverVersion", |a| {
                            a.version = Some("not-a-version".into());
                        }),
                    ]),
                })
                .collect(),
        }),
    }
}

#[test]
fn slices_group_our_devices_by_node_and_drop_bad_attributes() {
    let slices = [
        slice("a", "gpu", "node-0", &["gpu-0", "gpu-1"]),
        slice("b", "gpu", "node-0", &["gpu-1", "gpu-2"]),
        slice("c", "other", "node-1", &["x"]),
        slice("d", "gpu", "node-2", &["gpu-0"]),
    ];
    let (nodes, skipped) = devices_by_node("gpu", &slices);
    let names = |node: &str| {
        nodes[node]
            .iter()
            .map(|d| d.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(nodes.keys().collect::<Vec<_>>(), ["node-0", "node-2"]);
    assert_eq!(names("node-0"), ["gpu-0", "gpu-1", "gpu-2"]);
    assert_eq!(
        nodes["node-2"][0].attributes.len(),
        1,
        "the bad version is dropped"
    );
    assert_eq!(skipped.len(), 4);
    assert!(skipped.iter().all(|s| s.attribute == "driverVersion"));
}

fn unsuitable(i: usize) -> UnsuitableNode {
    UnsuitableNode {
        node: format!("node-{i}"),
        claim: Some("gpu".into()),
        reason: "claim gpu: 1 of 2 devices free matching model In [H200]".into(),
    }
}

#[test]
fn explanation_lists_nodes_then_says_how_many_more() {
    let few: Vec<_> = (0..2).map(unsuitable).collect();
    let text = explain_unsuitable(&few, 5);
    assert!(
        text.contains("node-0: claim gpu: 1 of 2 devices free matching model In [H200]"),
        "{text}"
    );
    assert!(text.contains("node-1:"));
    assert!(!text.contains("more"));
    let many: Vec<_> = (0..128).map(unsuitable).collect();
    let text = explain_unsuitable(&many, 3);
    assert!(
        text.contains("node-2:") && !text.contains("node-3:"),
        "{text}"
    );
    assert!(text.ends_with("and 125 more"), "{text}");
    assert!(text.contains("128 checked"));
    assert!(explain_unsuitable(&many, 128).len() <= 1000);
}

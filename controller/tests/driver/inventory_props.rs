//! Property tests of the `ResourceSlice` conversion into the allocator's devices: an attribute
//! with any combination of kinds and any quantity or version text converts exactly when one kind
//! is set and its text parses, never panicking; slices of any drivers, nodes and instance names
//! group our devices by node with the first instance of each name kept and every dropped
//! attribute reported against a device that exists; and devices written from the model convert
//! back to that model.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::model::{AttributeValue, Attributes, Device, Quantity, Version};
use dra_controller::driver::inventory::{attribute_value, device, devices_by_node, slice_node};
use k8s_openapi::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesInstance, NamedResourcesIntSlice,
    NamedResourcesResources, NamedResourcesStringSlice, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

const DRIVER: &str = "gpu.dra-ledger.io";

/// Quantity or version text: well-formed, nearly so, or anything.
fn numeric_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,6}(Ki|Mi|Gi|k|M|G|m)?",
        "(0|[1-9][0-9]{0,2})\\.(0|[1-9][0-9]{0,2})\\.(0|[1-9][0-9]{0,2})(-[a-z0-9]{1,4})?",
        "[-+0-9.eEkKMGiv]{0,12}",
        ".{0,12}",
    ]
}

/// An attribute with each of the seven kinds set or not.
fn attribute() -> impl Strategy<Value = NamedResourcesAttribute> {
    (
        "[a-z]{1,8}",
        prop::option::of(any::<bool>()),
        prop::option::of(any::<i64>()),
        prop::option::of(prop::collection::vec(any::<i64>(), 0..4)),
        prop::option::of(numeric_text()),
        prop::option::of(".{0,8}"),
        prop::option::of(prop::collection::vec(".{0,6}", 0..4)),
        prop::option::of(numeric_text()),
    )
        .prop_map(
            |(name, bool, int, ints, quantity, string, strings, version)| NamedResourcesAttribute {
                name,
                bool,
                int,
                int_slice: ints.map(|ints| NamedResourcesIntSlice { ints }),
                quantity: quantity.map(KubeQuantity),
                string,
                string_slice: strings.map(|strings| NamedResourcesStringSlice { strings }),
                version,
            },
        )
}

fn kinds_set(a: &NamedResourcesAttribute) -> usize {
    [
        a.bool.is_some(),
        a.int.is_some(),
        a.int_slice.is_some(),
        a.quantity.is_some(),
        a.string.is_some(),
        a.string_slice.is_some(),
        a.version.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count()
}

/// What the attribute converts to, worked out field by field.
fn expected_value(a: &NamedResourcesAttribute) -> Option<AttributeValue> {
    if kinds_set(a) != 1 {
        return None;
    }
    if let Some(b) = a.bool {
        return Some(AttributeValue::Bool(b));
    }
    if let Some(i) = a.int {
        return Some(AttributeValue::Int(i));
    }
    if let Some(slice) = &a.int_slice {
        return Some(AttributeValue::IntSlice(slice.ints.clone()));
    }
    if let Some(q) = &a.quantity {
        return Quantity::parse(&q.0).ok().map(AttributeValue::Quantity);
    }
    if let Some(s) = &a.string {
        return Some(AttributeValue::String(s.clone()));
    }
    if let Some(slice) = &a.string_slice {
        return Some(AttributeValue::StringSlice(slice.strings.clone()));
    }
    a.version
        .as_deref()
        .and_then(|v| Version::parse(v).ok())
        .map(AttributeValue::Version)
}

proptest! {
    #[test]
    fn an_attribute_converts_exactly_when_one_kind_is_set_and_parses(a in attribute()) {
        match (attribute_value(&a), expected_value(&a)) {
            (Ok(got), Some(expected)) => prop_assert_eq!(got, expected),
            (Err(reason), None) => {
                let reason = reason.to_string();
                prop_assert!(!reason.is_empty());
                let n = kinds_set(&a);
                if n != 1 {
                    prop_assert!(reason.contains(if n == 0 { "no value" } else { "values set" }), "{reason}");
                }
            }
            (got, expected) => prop_assert!(false, "{a:?}: got {got:?}, expected {expected:?}"),
        }
    }
}

fn instance() -> impl Strategy<Value = NamedResourcesInstance> {
    (
        prop_oneof![Just(String::new()), "gpu-[0-3]", ".{1,6}"],
        prop::option::of(prop::collection::vec(attribute(), 0..4)),
    )
        .prop_map(|(name, attributes)| NamedResourcesInstance { name, attributes })
}

fn slice() -> impl Strategy<Value = ResourceSlice> {
    (
        prop::sample::select(vec![DRIVER, "other.example.com", ""]),
        prop::option::of(prop_oneof![Just(String::new()), "node-[0-2]"]),
        prop::option::of(prop::collection::vec(instance(), 0..5)),
    )
        .prop_map(|(driver, node, instances)| ResourceSlice {
            metadata: ObjectMeta::default(),
            driver_name: driver.to_owned(),
            node_name: node,
            named_resources: instances.map(|instances| NamedResourcesResources { instances }),
        })
}

proptest! {
    #[test]
    fn slices_of_any_drivers_and_names_group_our_devices_by_node(
        slices in prop::collection::vec(slice(), 0..6),
    ) {
        let (nodes, skipped) = devices_by_node(DRIVER, &slices);
        // Worked out independently: per node of our slices, the first instance of each
        // non-empty name, in order.
        let mut expected: BTreeMap<String, Vec<&NamedResourcesInstance>> = BTreeMap::new();
        for slice in &slices {
            let Some(node) = slice_node(DRIVER, slice) else {
                prop_assert!(
                    slice.driver_name != DRIVER || slice.node_name.as_deref().unwrap_or("").is_empty()
                );
                continue;
            };
            let kept = expected.entry(node.to_owned()).or_default();
            for instance in slice.named_resources.iter().flat_map(|r| &r.instances) {
                if !instance.name.is_empty() && kept.iter().all(|k| k.name != instance.name) {
                    kept.push(instance);
                }
            }
        }
        prop_assert_eq!(
            nodes.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        let mut expected_skipped = 0;
        for (node, instances) in &expected {
            let devices = &nodes[node];
            prop_assert_eq!(devices.len(), instances.len());
            for (device, instance) in devices.iter().zip(instances) {
                prop_assert_eq!(&device.name, &instance.name);
                let mut attributes = BTreeMap::new();
                for a in instance.attributes.iter().flatten() {
                    match expected_value(a) {
                        Some(value) => {
                            attributes.insert(a.name.clone(), value);
                        }
                        None => expected_skipped += 1,
                    }
                }
                prop_assert_eq!(&device.attributes, &Attributes::from(attributes));
            }
        }
        prop_assert_eq!(skipped.len(), expected_skipped);
        for s in &skipped {
            let devices = nodes.get(&s.node);
            prop_assert!(devices.is_some_and(|d| d.iter().any(|d| d.name == s.device)), "{s:?}");
            prop_assert!(!s.reason.is_empty() && !s.attribute.is_empty(), "{s:?}");
        }
    }
}

/// A device of the model with attributes of every kind and well-formed values.
fn model_device() -> impl Strategy<Value = Device> {
    let value = prop_oneof![
        any::<bool>().prop_map(AttributeValue::Bool),
        any::<i64>().prop_map(AttributeValue::Int),
        prop::collection::vec(any::<i64>(), 0..4).prop_map(AttributeValue::IntSlice),
        "[0-9]{1,6}(Ki|Mi|Gi|k|M|G|m)?"
            .prop_map(|q| AttributeValue::Quantity(Quantity::parse(&q).unwrap())),
        ".{0,8}".prop_map(AttributeValue::String),
        prop::collection::vec(".{0,6}", 0..4).prop_map(AttributeValue::StringSlice),
        (0u64..100, 0u64..100, 0u64..100)
            .prop_map(|(a, b, c)| AttributeValue::Version(Version::new(a, b, c))),
    ];
    (
        ".{1,12}",
        prop::collection::btree_map("[a-z][a-z0-9.]{0,8}", value, 0..6),
    )
        .prop_map(|(name, attributes)| Device {
            name,
            attributes: attributes.into(),
        })
}

/// The instance a driver publishing `device` would write.
fn instance_of(device: &Device) -> NamedResourcesInstance {
    let attributes = device
        .attributes
        .iter()
        .map(|(name, value)| {
            let mut a = NamedResourcesAttribute {
                name: name.clone(),
                ..NamedResourcesAttribute::default()
            };
            match value {
                AttributeValue::Bool(b) => a.bool = Some(*b),
                AttributeValue::Int(i) => a.int = Some(*i),
                AttributeValue::IntSlice(ints) => {
                    a.int_slice = Some(NamedResourcesIntSlice { ints: ints.clone() });
                }
                AttributeValue::Quantity(q) => a.quantity = Some(KubeQuantity(q.to_string())),
                AttributeValue::String(s) => a.string = Some(s.clone()),
                AttributeValue::StringSlice(strings) => {
                    a.string_slice = Some(NamedResourcesStringSlice {
                        strings: strings.clone(),
                    });
                }
                AttributeValue::Version(v) => a.version = Some(v.to_string()),
            }
            a
        })
        .collect();
    NamedResourcesInstance {
        name: device.name.clone(),
        attributes: Some(attributes),
    }
}

proptest! {
    #[test]
    fn devices_written_from_the_model_convert_back_to_it(
        devices in prop::collection::vec(model_device(), 0..5),
    ) {
        let names: BTreeSet<&String> = devices.iter().map(|d| &d.name).collect();
        prop_assume!(names.len() == devices.len());
        for d in &devices {
            prop_assert_eq!(device("node-0", &instance_of(d)), (d.clone(), Vec::new()));
        }
        let slice = ResourceSlice {
            metadata: ObjectMeta::default(),
            driver_name: DRIVER.to_owned(),
            node_name: Some("node-0".to_owned()),
            named_resources: Some(NamedResourcesResources {
                instances: devices.iter().map(instance_of).collect(),
            }),
        };
        let (nodes, skipped) = devices_by_node(DRIVER, [&slice]);
        prop_assert!(skipped.is_empty());
        prop_assert_eq!(nodes.get("node-0").cloned().unwrap_or_default(), devices);
    }
}

//! The node's inventory as the 1.30 kubelet wants it from `NodeListAndWatchResources`: one
//! `ResourceModel` whose `namedResources` instances are the devices, each with its typed
//! attributes; the kubelet turns it into the node's `ResourceSlice`. Pure mapping, no I/O.

use dra_allocator::model::AttributeValue;

use crate::device::{Inventory, NodeDevice};
use dra_types::kubelet::k8s::io::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesAttributeValue, NamedResourcesInstance,
    NamedResourcesIntSlice, NamedResourcesResources, NamedResourcesStringSlice, ResourceModel,
};
use dra_types::kubelet::k8s::io::apimachinery::pkg::api::resource::Quantity;
use dra_types::kubelet::v1alpha3::NodeListAndWatchResourcesResponse;

/// The stream message for `inventory`: every device in one `ResourceModel`, in name order; no
/// model at all when the node has no device, so that the kubelet removes the node's slice.
pub fn list_response(inventory: &Inventory) -> NodeListAndWatchResourcesResponse {
    let resources = if inventory.is_empty() {
        Vec::new()
    } else {
        vec![resource_model(inventory)]
    };
    NodeListAndWatchResourcesResponse { resources }
}

/// Every device of `inventory` as one `namedResources` model.
pub fn resource_model(inventory: &Inventory) -> ResourceModel {
    ResourceModel {
        named_resources: Some(NamedResourcesResources {
            instances: inventory.values().map(instance).collect(),
        }),
    }
}

/// One device as a named-resources instance, its attributes in name order.
pub fn instance(device: &NodeDevice) -> NamedResourcesInstance {
    NamedResourcesInstance {
        name: Some(device.name.clone()),
        attributes: device
            .attributes
            .iter()
            .map(|(name, value)| NamedResourcesAttribute {
                name: Some(name.clone()),
                attribute_value: Some(attribute_value(value)),
            })
            .collect(),
    }
}

/// An attribute value with exactly its one field set; a quantity as its canonical text.
pub fn attribute_value(value: &AttributeValue) -> NamedResourcesAttributeValue {
    let mut out = NamedResourcesAttributeValue::default();
    match value {
        AttributeValue::Bool(b) => out.bool = Some(*b),
        AttributeValue::Int(i) => out.int = Some(*i),
        AttributeValue::Quantity(q) => {
            out.quantity = Some(Quantity {
                string: Some(q.to_string()),
            });
        }
        AttributeValue::String(s) => out.string = Some(s.clone()),
        AttributeValue::Version(v) => out.version = Some(v.to_string()),
        AttributeValue::IntSlice(ints) => {
            out.int_slice = Some(NamedResourcesIntSlice { ints: ints.clone() });
        }
        AttributeValue::StringSlice(strings) => {
            out.string_slice = Some(NamedResourcesStringSlice {
                strings: strings.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_allocator::model::{Quantity as ModelQuantity, Version};

    fn device(name: &str, attributes: &[(&str, AttributeValue)]) -> NodeDevice {
        NodeDevice {
            name: name.to_owned(),
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            ..NodeDevice::default()
        }
    }

    #[test]
    fn every_attribute_kind_sets_exactly_its_own_field() {
        let quantity = attribute_value(&AttributeValue::Quantity(
            ModelQuantity::parse("80Gi").unwrap(),
        ));
        assert_eq!(quantity.quantity.unwrap().string.as_deref(), Some("80Gi"));
        assert_eq!(quantity.bool, None);
        assert_eq!(quantity.string, None);
        let version = attribute_value(&AttributeValue::Version(
            Version::parse("550.54.15").unwrap(),
        ));
        assert_eq!(version.version.as_deref(), Some("550.54.15"));
        assert_eq!(version.string, None);
        assert_eq!(
            attribute_value(&AttributeValue::Bool(false)).bool,
            Some(false)
        );
        assert_eq!(attribute_value(&AttributeValue::Int(-3)).int, Some(-3));
        assert_eq!(
            attribute_value(&AttributeValue::IntSlice(vec![1, 2]))
                .int_slice
                .unwrap()
                .ints,
            [1, 2]
        );
        assert_eq!(
            attribute_value(&AttributeValue::StringSlice(vec!["a".into()]))
                .string_slice
                .unwrap()
                .strings,
            ["a"]
        );
    }

    #[test]
    fn devices_become_instances_in_name_order_in_one_model() {
        let mut inventory = Inventory::new();
        for d in [
            device("gpu-1", &[("numa", AttributeValue::Int(1))]),
            device(
                "gpu-0",
                &[
                    ("vendor", AttributeValue::String("nvidia".into())),
                    ("numa", AttributeValue::Int(0)),
                ],
            ),
        ] {
            inventory.insert(d.name.clone(), d);
        }
        let response = list_response(&inventory);
        assert_eq!(response.resources.len(), 1);
        let instances = &response.resources[0]
            .named_resources
            .as_ref()
            .unwrap()
            .instances;
        let names: Vec<_> = instances
            .iter()
            .map(|i| i.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["gpu-0", "gpu-1"]);
        let attributes: Vec<_> = instances[0]
            .attributes
            .iter()
            .map(|a| a.name.as_deref().unwrap())
            .collect();
        assert_eq!(attributes, ["numa", "vendor"]);
    }

    #[test]
    fn an_empty_inventory_sends_no_model() {
        assert!(list_response(&Inventory::new()).resources.is_empty());
    }

    #[test]
    fn an_attribute_travels_with_its_value_nested_in_field_two_as_kubernetes_encodes_it() {
        use prost::Message;
        let attribute = NamedResourcesAttribute {
            name: Some("numa".into()),
            attribute_value: Some(attribute_value(&AttributeValue::Int(0))),
        };
        // name = 1 "numa"; attributeValue = 2 { int = 7: 0 } (a set zero is still sent)
        assert_eq!(
            attribute.encode_to_vec(),
            [0x0a, 4, b'n', b'u', b'm', b'a', 0x12, 2, 0x38, 0]
        );
    }
}

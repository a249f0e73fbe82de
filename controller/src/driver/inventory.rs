//! The device inventory as the cluster publishes it: this driver's ResourceSlices
//! (`namedResources.instances[]`) turned into the allocator's devices, grouped by node.
//!
//! Pure conversions; the watch that feeds them lives in `background`. Must not depend on the
//! ledger handle or the API client. An attribute that does not parse is dropped from its device
//! and reported, never a panic.

use std::collections::BTreeMap;

use dra_allocator::model::{AttributeValue, Device, ParseError, Quantity, Version};
use k8s_openapi::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesInstance, ResourceSlice,
};

/// An attribute that was dropped because it does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedAttribute {
    /// The node.
    pub node: String,
    /// The device.
    pub device: String,
    /// The attribute name.
    pub attribute: String,
    /// Why it was dropped.
    pub reason: String,
}

/// Why an attribute does not convert into the allocator's value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttributeError {
    /// No kind of value is set.
    #[error("no value set")]
    NoValue,
    /// More than one kind of value is set.
    #[error("{0} values set, expected exactly one")]
    SeveralValues(usize),
    /// The quantity or version text does not parse.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// Converts one attribute into the allocator's value; exactly one kind must be set.
pub fn attribute_value(
    attribute: &NamedResourcesAttribute,
) -> Result<AttributeValue, AttributeError> {
    let mut values = Vec::new();
    if let Some(b) = attribute.bool {
        values.push(Ok(AttributeValue::Bool(b)));
    }
    if let Some(i) = attribute.int {
        values.push(Ok(AttributeValue::Int(i)));
    }
    if let Some(slice) = &attribute.int_slice {
        values.push(Ok(AttributeValue::IntSlice(slice.ints.clone())));
    }
    if let Some(q) = &attribute.quantity {
        values.push(
            Quantity::parse(&q.0)
                .map(AttributeValue::Quantity)
                .map_err(AttributeError::from),
        );
    }
    if let Some(s) = &attribute.string {
        values.push(Ok(AttributeValue::String(s.clone())));
    }
    if let Some(slice) = &attribute.string_slice {
        values.push(Ok(AttributeValue::StringSlice(slice.strings.clone())));
    }
    if let Some(v) = &attribute.version {
        values.push(
            Version::parse(v)
                .map(AttributeValue::Version)
                .map_err(AttributeError::from),
        );
    }
    match values.len() {
        0 => Err(AttributeError::NoValue),
        1 => values.pop().unwrap_or(Err(AttributeError::NoValue)),
        n => Err(AttributeError::SeveralValues(n)),
    }
}

/// Converts one instance into a device; attributes that do not parse are dropped and returned.
pub fn device(node: &str, instance: &NamedResourcesInstance) -> (Device, Vec<SkippedAttribute>) {
    let mut device = Device::new(&instance.name);
    let mut skipped = Vec::new();
    for attribute in instance.attributes.iter().flatten() {
        match attribute_value(attribute) {
            Ok(value) => {
                device.attributes.insert(attribute.name.clone(), value);
            }
            Err(reason) => skipped.push(SkippedAttribute {
                node: node.to_owned(),
                device: instance.name.clone(),
                attribute: attribute.name.clone(),
                reason: reason.to_string(),
            }),
        }
    }
    (device, skipped)
}

/// The devices of this driver on each node, from all slices of `driver_name` in `slices`.
/// Slices of other drivers or without `namedResources` contribute nothing; a device name that
/// appears twice on one node keeps its first instance.
pub fn devices_by_node<'a>(
    driver_name: &str,
    slices: impl IntoIterator<Item = &'a ResourceSlice>,
) -> (BTreeMap<String, Vec<Device>>, Vec<SkippedAttribute>) {
    let mut nodes: BTreeMap<String, Vec<Device>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for slice in slices {
        if slice.driver_name != driver_name {
            continue;
        }
        let Some(node) = slice.node_name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        let devices = nodes.entry(node.to_owned()).or_default();
        for instance in slice
            .named_resources
            .as_ref()
            .map(|r| r.instances.as_slice())
            .unwrap_or_default()
        {
            if devices.iter().any(|d| d.name == instance.name) || instance.name.is_empty() {
                continue;
            }
            let (device, dropped) = device(node, instance);
            devices.push(device);
            skipped.extend(dropped);
        }
    }
    (nodes, skipped)
}

/// The node a slice publishes devices for, if it is one of `driver_name`'s.
pub fn slice_node<'a>(driver_name: &str, slice: &'a ResourceSlice) -> Option<&'a str> {
    (slice.driver_name == driver_name)
        .then_some(slice.node_name.as_deref())
        .flatten()
        .filter(|n| !n.is_empty())
}

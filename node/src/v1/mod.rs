//! The `v1` generation (`resource.k8s.io/v1`, Kubernetes 1.34+), node side: the node's
//! `ResourceSlice` built from its inventory ([`slice_for`]; [`pool`] lays out a pool with shared
//! devices in several) and kept published ([`slices`]), our
//! opaque device configuration ([`config`]), what a claim's allocation asks this node to prepare
//! ([`allocation`]), where claims are read ([`claims`]) and the device status the agent reports
//! in the claims it prepared ([`status`]), and the taints of unhealthy devices ([`taints`]). The API objects themselves are
//! `dra_types::resource_v1`'s. On `v1alpha2` (Kubernetes 1.30) the kubelet builds the slice from
//! `NodeListAndWatchResources`; here the driver publishes the slice itself.

pub mod allocation;
pub mod claims;
pub mod config;
pub mod pool;
pub mod slices;
pub mod status;
pub mod taints;

use std::collections::BTreeMap;

use dra_allocator::model::AttributeValue;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::device::Inventory;
use dra_types::resource_v1::{
    CounterSet, Device, DeviceAttribute, DeviceCapacity, ResourcePool, ResourceSlice,
    ResourceSliceSpec, MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_DEVICES_PER_SLICE,
};

/// Whether the API server answered `error` with 409 Conflict.
fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(response) if response.code == 409)
}

/// Whether the API server answered `error` with 404 Not Found.
fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(response) if response.code == 404)
}

/// Why an inventory has no v1 `ResourceSlice`: something v1 cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SliceError {
    /// More devices than one slice allows (for [`slice_for`], which builds a single slice).
    #[error("{count} devices on the node, but one ResourceSlice holds at most {max}")]
    TooManyDevices {
        /// Devices in the inventory.
        count: usize,
        /// [`MAX_DEVICES_PER_SLICE`].
        max: usize,
    },
    /// A counter set or a device's consumption of one with more counters than v1 allows.
    #[error("{owner}: {count} counters, at most {max} allowed")]
    TooManyCounters {
        /// `counter set NAME` or the device and the set it consumes.
        owner: String,
        /// Its counters.
        count: usize,
        /// [`pool::MAX_COUNTERS_PER_SET`].
        max: usize,
    },
    /// A device name that is not a DNS label.
    #[error(
        "device {device:?}: name is not a DNS label (lower-case alphanumerics and '-', at most 63)"
    )]
    DeviceName {
        /// The device.
        device: String,
    },
    /// More attributes and capacities than one device may have.
    #[error("device {device}: {count} attributes and capacities, at most {max} allowed")]
    TooManyAttributes {
        /// The device.
        device: String,
        /// Attributes of the device.
        count: usize,
        /// [`MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE`].
        max: usize,
    },
    /// An attribute whose name or value v1 cannot hold.
    #[error("device {device}, attribute {attribute:?}: {reason}")]
    Attribute {
        /// The device.
        device: String,
        /// The attribute name.
        attribute: String,
        /// What v1 does not allow.
        reason: AttributeRefusal,
    },
}

/// What v1 does not allow of an attribute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeRefusal {
    /// The name is not `<id>` or `<domain>/<id>`.
    #[error("name is not <id> or <domain>/<id> (id: a C identifier of at most 32)")]
    Name,
    /// A list value: v1 has no list type.
    #[error("v1 attributes have no list type")]
    List,
    /// A string or version longer than v1 allows.
    #[error("value is {len} bytes long, at most {MAX_ATTRIBUTE_VALUE_LENGTH} allowed")]
    TooLong {
        /// The value's length in bytes.
        len: usize,
    },
}

/// The node's `ResourceSlice` for `driver` at pool `generation`: one pool named after the node
/// with this one slice, `nodeName` set, one device per inventory entry (name order). Attributes
/// keep their names (unqualified names are in the driver's domain); quantities go to `capacity`,
/// since v1 attributes have no quantity type. `metadata.generateName` is `<node>-<driver>-`, as
/// the upstream kubelet-plugin helper names its slices.
///
/// Refuses an inventory v1 cannot publish: more than [`MAX_DEVICES_PER_SLICE`] devices, device
/// names that are not DNS labels, attribute names that are not `<id>` or `<domain>/<id>`, list
/// values, strings or versions over 64 bytes, more than 32 attributes and capacities per device.
pub fn slice_for(
    node: &str,
    driver: &str,
    generation: i64,
    inventory: &Inventory,
) -> Result<ResourceSlice, SliceError> {
    if inventory.len() > MAX_DEVICES_PER_SLICE {
        return Err(SliceError::TooManyDevices {
            count: inventory.len(),
            max: MAX_DEVICES_PER_SLICE,
        });
    }
    let devices = inventory
        .values()
        .map(|d| device(&d.name, &d.attributes))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(slice(node, driver, generation, 1, devices, Vec::new()))
}

/// One slice of the node's pool of `count` slices, holding `devices` and `counter_sets`.
fn slice(
    node: &str,
    driver: &str,
    generation: i64,
    count: usize,
    devices: Vec<Device>,
    counter_sets: Vec<CounterSet>,
) -> ResourceSlice {
    ResourceSlice::new(
        ObjectMeta {
            generate_name: Some(format!("{node}-{driver}-")),
            ..ObjectMeta::default()
        },
        ResourceSliceSpec {
            driver: driver.to_owned(),
            pool: ResourcePool {
                name: node.to_owned(),
                generation,
                resource_slice_count: i64::try_from(count).unwrap_or(i64::MAX),
            },
            node_name: Some(node.to_owned()),
            devices,
            shared_counters: counter_sets,
            ..ResourceSliceSpec::default()
        },
    )
}

/// One device: its attributes split into v1 attributes and capacities.
fn device(name: &str, attributes: &BTreeMap<String, AttributeValue>) -> Result<Device, SliceError> {
    if !is_dns_label(name) {
        return Err(SliceError::DeviceName {
            device: name.to_owned(),
        });
    }
    if attributes.len() > MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE {
        return Err(SliceError::TooManyAttributes {
            device: name.to_owned(),
            count: attributes.len(),
            max: MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
        });
    }
    let mut out = Device {
        name: name.to_owned(),
        ..Device::default()
    };
    for (key, value) in attributes {
        let refuse = |reason: AttributeRefusal| SliceError::Attribute {
            device: name.to_owned(),
            attribute: key.clone(),
            reason,
        };
        if !is_attribute_name(key) {
            return Err(refuse(AttributeRefusal::Name));
        }
        let attribute = match value {
            AttributeValue::Int(i) => DeviceAttribute::Int(*i),
            AttributeValue::Bool(b) => DeviceAttribute::Bool(*b),
            AttributeValue::String(s) => DeviceAttribute::String(bounded(s).map_err(refuse)?),
            AttributeValue::Version(v) => {
                DeviceAttribute::Version(bounded(&v.to_string()).map_err(refuse)?)
            }
            AttributeValue::Quantity(q) => {
                out.capacity
                    .insert(key.clone(), DeviceCapacity::new(Quantity(q.to_string())));
                continue;
            }
            AttributeValue::IntSlice(_) | AttributeValue::StringSlice(_) => {
                return Err(refuse(AttributeRefusal::List));
            }
        };
        out.attributes.insert(key.clone(), attribute);
    }
    Ok(out)
}

/// `text` if v1 takes it as a `string` or `version` value.
fn bounded(text: &str) -> Result<String, AttributeRefusal> {
    if text.len() > MAX_ATTRIBUTE_VALUE_LENGTH {
        Err(AttributeRefusal::TooLong { len: text.len() })
    } else {
        Ok(text.to_owned())
    }
}

/// An RFC 1123 label: lower-case alphanumerics and `-`, alphanumeric at both ends, ≤ 63.
pub(crate) fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| alnum(c) || *c == b'-')
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
}

/// An RFC 1123 subdomain (dot-separated labels, ≤ 253); `max` bounds it further.
fn is_dns_subdomain(s: &str, max: usize) -> bool {
    s.len() <= max.min(253) && s.split('.').all(is_dns_label)
}

/// An attribute or capacity name: `<id>` or `<domain>/<id>`, id a C identifier of at most 32,
/// domain a driver name (≤ 63, a DNS subdomain after lower-casing).
pub(crate) fn is_attribute_name(s: &str) -> bool {
    let (domain, id) = match s.split_once('/') {
        Some((domain, id)) => (Some(domain), id),
        None => (None, s),
    };
    let c_identifier = id.len() <= 32
        && id
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
    c_identifier && domain.is_none_or(|d| is_dns_subdomain(&d.to_ascii_lowercase(), 63))
}

#[cfg(test)]
mod tests {
    use dra_allocator::model::{Quantity as ModelQuantity, Version};
    use serde_json::json;

    use super::*;
    use crate::device::NodeDevice;
    use dra_types::resource_v1::{DeviceClass, ResourceClaim};

    const DRIVER: &str = "gpu.example.com";

    fn gpu(name: &str, attributes: &[(&str, AttributeValue)]) -> NodeDevice {
        NodeDevice {
            name: name.into(),
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            ..NodeDevice::default()
        }
    }

    fn inventory(devices: Vec<NodeDevice>) -> Inventory {
        devices.into_iter().map(|d| (d.name.clone(), d)).collect()
    }

    fn refused(attributes: &[(&str, AttributeValue)]) -> SliceError {
        slice_for("n1", DRIVER, 1, &inventory(vec![gpu("gpu-0", attributes)])).unwrap_err()
    }

    #[test]
    fn the_slice_names_the_node_pool_and_devices_and_moves_quantities_to_capacity() {
        let inv = inventory(vec![
            gpu(
                "gpu-0",
                &[
                    ("model", AttributeValue::String("A100".into())),
                    ("numa", AttributeValue::Int(1)),
                    ("migEnabled", AttributeValue::Bool(false)),
                    (
                        "driverVersion",
                        AttributeValue::Version(Version::parse("550.54.15").unwrap()),
                    ),
                    (
                        "memory",
                        AttributeValue::Quantity(ModelQuantity::parse("80Gi").unwrap()),
                    ),
                ],
            ),
            gpu("gpu-1", &[]),
        ]);
        let slice = slice_for("n1", DRIVER, 7, &inv).unwrap();
        assert_eq!(slice.api_version, "resource.k8s.io/v1");
        assert_eq!(slice.kind, "ResourceSlice");
        assert_eq!(
            slice.metadata.generate_name.as_deref(),
            Some("n1-gpu.example.com-")
        );
        assert_eq!(slice.spec.driver, DRIVER);
        assert_eq!(slice.spec.node_name.as_deref(), Some("n1"));
        assert_eq!(
            slice.spec.pool,
            ResourcePool {
                name: "n1".into(),
                generation: 7,
                resource_slice_count: 1
            }
        );
        let names: Vec<_> = slice.spec.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["gpu-0", "gpu-1"]);
        let d = &slice.spec.devices[0];
        assert_eq!(
            d.attributes["model"],
            DeviceAttribute::String("A100".into())
        );
        assert_eq!(d.attributes["numa"], DeviceAttribute::Int(1));
        assert_eq!(d.attributes["migEnabled"], DeviceAttribute::Bool(false));
        assert_eq!(
            d.attributes["driverVersion"],
            DeviceAttribute::Version("550.54.15".into())
        );
        assert!(!d.attributes.contains_key("memory"));
        assert_eq!(d.capacity["memory"].value, Quantity("80Gi".into()));
        assert!(slice.spec.devices[1].attributes.is_empty());
    }

    #[test]
    fn an_empty_inventory_is_an_empty_slice() {
        let slice = slice_for("n1", DRIVER, 0, &Inventory::new()).unwrap();
        assert!(slice.spec.devices.is_empty());
    }

    #[test]
    fn values_v1_cannot_hold_are_refused_naming_device_and_attribute() {
        let long = "x".repeat(65);
        let err = refused(&[("serial", AttributeValue::String(long))]);
        assert!(
            matches!(&err, SliceError::Attribute { device, attribute, .. }
                if device == "gpu-0" && attribute == "serial"),
            "{err:?}"
        );
        assert!(err.to_string().contains("gpu-0") && err.to_string().contains("serial"));
        // 64 bytes are still fine
        let max = "x".repeat(64);
        slice_for(
            "n1",
            DRIVER,
            1,
            &inventory(vec![gpu(
                "gpu-0",
                &[("serial", AttributeValue::String(max))],
            )]),
        )
        .unwrap();

        for list in [
            AttributeValue::IntSlice(vec![1, 2]),
            AttributeValue::StringSlice(vec!["a".into()]),
        ] {
            let err = refused(&[("cores", list)]);
            assert!(err.to_string().contains("list"), "{err}");
        }
        for bad in [
            "pci-address",
            "9lives",
            "",
            &"a".repeat(33),
            "Not_A.Domain!/x",
        ] {
            let err = refused(&[(bad, AttributeValue::Int(1))]);
            assert!(
                matches!(err, SliceError::Attribute { .. }),
                "{bad}: {err:?}"
            );
        }
        for good in ["pcieRoot", "_x", "gpu.example.com/index", &"a".repeat(32)] {
            let inv = inventory(vec![gpu("gpu-0", &[(good, AttributeValue::Int(1))])]);
            slice_for("n1", DRIVER, 1, &inv).unwrap();
        }
    }

    #[test]
    fn too_many_devices_attributes_or_a_bad_device_name_are_refused() {
        let many = inventory((0..=128).map(|i| gpu(&format!("gpu-{i}"), &[])).collect());
        assert_eq!(
            slice_for("n1", DRIVER, 1, &many).unwrap_err(),
            SliceError::TooManyDevices {
                count: 129,
                max: 128
            }
        );
        let exactly = inventory((0..128).map(|i| gpu(&format!("gpu-{i}"), &[])).collect());
        assert_eq!(
            slice_for("n1", DRIVER, 1, &exactly)
                .unwrap()
                .spec
                .devices
                .len(),
            128
        );

        let attrs: Vec<(String, AttributeValue)> = (0..33)
            .map(|i| (format!("a{i}"), AttributeValue::Int(i)))
            .collect();
        let attrs: Vec<(&str, AttributeValue)> =
            attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        assert!(matches!(
            refused(&attrs),
            SliceError::TooManyAttributes { count: 33, .. }
        ));

        let err = slice_for("n1", DRIVER, 1, &inventory(vec![gpu("GPU_0", &[])])).unwrap_err();
        assert_eq!(
            err,
            SliceError::DeviceName {
                device: "GPU_0".into()
            }
        );
    }

    #[test]
    fn a_slice_serializes_with_the_api_field_names_and_reads_back() {
        let inv = inventory(vec![gpu(
            "gpu-0",
            &[
                ("index", AttributeValue::Int(0)),
                (
                    "memory",
                    AttributeValue::Quantity(ModelQuantity::parse("80Gi").unwrap()),
                ),
            ],
        )]);
        let slice = slice_for("n1", DRIVER, 3, &inv).unwrap();
        let value = serde_json::to_value(&slice).unwrap();
        assert_eq!(
            value,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"generateName": "n1-gpu.example.com-"},
                "spec": {
                    "driver": "gpu.example.com",
                    "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
                    "nodeName": "n1",
                    "devices": [{
                        "name": "gpu-0",
                        "attributes": {"index": {"int": 0}},
                        "capacity": {"memory": {"value": "80Gi"}}
                    }]
                }
            })
        );
        let back: ResourceSlice = serde_json::from_value(value).unwrap();
        assert_eq!(back, slice);
    }

    #[test]
    fn an_attribute_with_two_values_or_none_does_not_parse() {
        for bad in [json!({"int": 1, "bool": true}), json!({})] {
            assert!(serde_json::from_value::<DeviceAttribute>(bad).is_err());
        }
        for (text, want) in [
            (json!({"bool": true}), DeviceAttribute::Bool(true)),
            (json!({"string": "a"}), DeviceAttribute::String("a".into())),
            (
                json!({"version": "1.0.0"}),
                DeviceAttribute::Version("1.0.0".into()),
            ),
        ] {
            assert_eq!(
                serde_json::from_value::<DeviceAttribute>(text).unwrap(),
                want
            );
        }
    }

    #[test]
    fn yaml_has_the_attribute_as_a_map_not_a_tag() {
        let device = Device {
            name: "gpu-0".into(),
            attributes: [("index".to_owned(), DeviceAttribute::Int(3))].into(),
            ..Device::default()
        };
        let yaml = serde_yaml::to_string(&device).unwrap();
        assert_eq!(yaml, "name: gpu-0\nattributes:\n  index:\n    int: 3\n");
        assert_eq!(serde_yaml::from_str::<Device>(&yaml).unwrap(), device);
    }

    #[test]
    fn a_claim_as_the_api_returns_it_reads_its_allocation_and_round_trips() {
        let value = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u-1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}],
                        "config": [{
                            "source": "FromClaim",
                            "requests": ["gpu"],
                            "opaque": {"driver": DRIVER, "parameters": {"kind": "GpuConfig"}}
                        }]
                    },
                    "nodeSelector": {"nodeSelectorTerms": []}
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "p-1"}]
            }
        });
        let claim: ResourceClaim = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(claim.metadata.uid.as_deref(), Some("u-1"));
        let devices = &claim
            .status
            .as_ref()
            .unwrap()
            .allocation
            .as_ref()
            .unwrap()
            .devices;
        assert_eq!(devices.results[0].device, "gpu-0");
        assert_eq!(devices.results[0].admin_access, None);
        let opaque = devices.config[0].opaque.as_ref().unwrap();
        assert_eq!(opaque.parameters["kind"], "GpuConfig");

        // the whole claim is modelled: it is written back unchanged
        assert_eq!(serde_json::to_value(&claim).unwrap(), value);
    }

    #[test]
    fn a_list_item_without_api_version_and_kind_gets_them() {
        let claim: ResourceClaim =
            serde_json::from_value(json!({"metadata": {"uid": "u"}})).unwrap();
        assert_eq!(claim.api_version, "resource.k8s.io/v1");
        assert_eq!(claim.kind, "ResourceClaim");
        assert!(claim.status.is_none());
    }

    #[test]
    fn a_device_class_serializes_its_cel_selectors() {
        let class = DeviceClass::with_cel(DRIVER, &["device.driver == 'gpu.example.com'"]);
        assert_eq!(
            serde_json::to_value(&class).unwrap(),
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}
            })
        );
    }

    #[test]
    fn the_kube_resource_impls_name_group_version_plural_and_urls() {
        use kube::Resource;
        assert_eq!(ResourceSlice::api_version(&()), "resource.k8s.io/v1");
        assert_eq!(ResourceSlice::plural(&()), "resourceslices");
        assert_eq!(ResourceClaim::kind(&()), "ResourceClaim");
        assert_eq!(
            ResourceSlice::url_path(&(), None),
            "/apis/resource.k8s.io/v1/resourceslices"
        );
        assert_eq!(
            ResourceClaim::url_path(&(), Some("ns")),
            "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
        );
        assert_eq!(
            DeviceClass::url_path(&(), None),
            "/apis/resource.k8s.io/v1/deviceclasses"
        );
    }

    // `kube::Api` accepts the types with the scopes the API gives them.
    #[allow(dead_code)]
    fn apis(client: kube::Client) {
        let _: kube::Api<ResourceSlice> = kube::Api::all(client.clone());
        let _: kube::Api<DeviceClass> = kube::Api::all(client.clone());
        let _: kube::Api<ResourceClaim> = kube::Api::namespaced(client, "ns");
    }
}

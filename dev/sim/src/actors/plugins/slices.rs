//! A plugin's `NodeListAndWatchResources` message as `resource.k8s.io/v1alpha2` objects: each
//! `ResourceModel` becomes the model of one `ResourceSlice` of the node and driver, and the
//! slices stored are brought to match as the 1.30 kubelet does (a slice whose model is still
//! published stays, an obsolete slice is reused for a new model, the rest are created or deleted).
//!
//! Pure: conversion and diffing only; the resources module reads and writes the slices.

use k8s_openapi::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesInstance, NamedResourcesIntSlice,
    NamedResourcesResources, NamedResourcesStringSlice, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use dra_types::kubelet::k8s::io::api::resource::v1alpha2 as proto;

/// The resource model of one slice (v1alpha2 has `namedResources` only).
pub(crate) type Model = Option<NamedResourcesResources>;

/// The models of a message, in its order, normalized (see [`normalize`]).
pub(crate) fn models(resources: &[proto::ResourceModel]) -> Vec<Model> {
    resources
        .iter()
        .map(|r| normalize(r.named_resources.as_ref().map(named_resources)))
        .collect()
}

fn named_resources(named: &proto::NamedResourcesResources) -> NamedResourcesResources {
    NamedResourcesResources {
        instances: named
            .instances
            .iter()
            .map(|i| NamedResourcesInstance {
                name: i.name.clone().unwrap_or_default(),
                attributes: Some(i.attributes.iter().map(attribute).collect()),
            })
            .collect(),
    }
}

fn attribute(attribute: &proto::NamedResourcesAttribute) -> NamedResourcesAttribute {
    let value = attribute.attribute_value.clone().unwrap_or_default();
    NamedResourcesAttribute {
        name: attribute.name.clone().unwrap_or_default(),
        bool: value.bool,
        string: value.string,
        quantity: value.quantity.and_then(|q| q.string).map(Quantity),
        int: value.int,
        int_slice: value
            .int_slice
            .map(|s| NamedResourcesIntSlice { ints: s.ints }),
        string_slice: value
            .string_slice
            .map(|s| NamedResourcesStringSlice { strings: s.strings }),
        version: value.version,
    }
}

/// The model as stored: an instance without attributes has none (`None`), so that a model read
/// back from the API server compares equal to the one written.
pub(crate) fn normalize(model: Model) -> Model {
    model.map(|mut named| {
        for instance in &mut named.instances {
            if instance.attributes.as_ref().is_some_and(Vec::is_empty) {
                instance.attributes = None;
            }
        }
        named
    })
}

/// One write that brings the stored slices to the published models.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SliceChange {
    /// Create a slice with this model.
    Create(Model),
    /// Give the existing slice of this name this model.
    Update(String, Model),
    /// Delete the slice of this name.
    Delete(String),
}

/// The writes that make `stored` (`(name, model)` of the node's slices of the driver) match
/// `wanted`: a stored slice whose model is wanted stays; each wanted model not stored takes over
/// an obsolete slice if one is left, else is created; obsolete slices left over are deleted.
pub(crate) fn plan(stored: &[(String, Model)], wanted: &[Model]) -> Vec<SliceChange> {
    let mut matched = vec![false; wanted.len()];
    let mut obsolete = Vec::new();
    for (name, model) in stored {
        let model = normalize(model.clone());
        let found = wanted
            .iter()
            .enumerate()
            .position(|(i, w)| !matched[i] && *w == model);
        match found {
            Some(i) => matched[i] = true,
            None => obsolete.push(name.clone()),
        }
    }
    let mut obsolete = obsolete.into_iter();
    let mut changes = Vec::new();
    for (model, _) in wanted.iter().zip(&matched).filter(|(_, m)| !**m) {
        changes.push(match obsolete.next() {
            Some(name) => SliceChange::Update(name, model.clone()),
            None => SliceChange::Create(model.clone()),
        });
    }
    changes.extend(obsolete.map(SliceChange::Delete));
    changes
}

/// A new slice of `driver` on `node` (UID `node_uid`) with `model`: `generateName
/// <node>-<driver>-`, owned by the Node as the simulated inventory's slices are.
pub(crate) fn new_slice(node: &str, node_uid: &str, driver: &str, model: Model) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{node}-{driver}-")),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_owned(),
                uid: node_uid.to_owned(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        driver_name: driver.to_owned(),
        node_name: Some(node.to_owned()),
        named_resources: model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unnecessary_wraps)]
    fn model(devices: &[&str]) -> Model {
        Some(NamedResourcesResources {
            instances: devices
                .iter()
                .map(|d| NamedResourcesInstance {
                    name: (*d).into(),
                    attributes: None,
                })
                .collect(),
        })
    }

    fn stored(entries: &[(&str, &[&str])]) -> Vec<(String, Model)> {
        entries
            .iter()
            .map(|(name, devices)| ((*name).to_owned(), model(devices)))
            .collect()
    }

    #[test]
    fn a_message_converts_every_attribute_kind() {
        let value = proto::NamedResourcesAttributeValue {
            quantity: Some(
                dra_types::kubelet::k8s::io::apimachinery::pkg::api::resource::Quantity {
                    string: Some("80Gi".into()),
                },
            ),
            ..Default::default()
        };
        let message = [proto::ResourceModel {
            named_resources: Some(proto::NamedResourcesResources {
                instances: vec![
                    proto::NamedResourcesInstance {
                        name: Some("gpu-0".into()),
                        attributes: vec![
                            proto::NamedResourcesAttribute {
                                name: Some("memory".into()),
                                attribute_value: Some(value),
                            },
                            proto::NamedResourcesAttribute {
                                name: Some("cores".into()),
                                attribute_value: Some(proto::NamedResourcesAttributeValue {
                                    int_slice: Some(proto::NamedResourcesIntSlice {
                                        ints: vec![1, 2],
                                    }),
                                    ..Default::default()
                                }),
                            },
                        ],
                    },
                    proto::NamedResourcesInstance {
                        name: Some("gpu-1".into()),
                        attributes: vec![],
                    },
                ],
            }),
        }];
        let converted = models(&message);
        let named = converted[0].as_ref().unwrap();
        let attributes = named.instances[0].attributes.as_ref().unwrap();
        assert_eq!(attributes[0].quantity, Some(Quantity("80Gi".into())));
        assert_eq!(attributes[1].int_slice.as_ref().unwrap().ints, [1, 2]);
        assert_eq!(named.instances[1].attributes, None);
        assert_eq!(models(&[proto::ResourceModel::default()]), [None]);
    }

    #[test]
    fn matching_slices_stay_and_nothing_is_written() {
        let wanted = [model(&["a"]), model(&["b"])];
        assert!(plan(&stored(&[("s2", &["b"]), ("s1", &["a"])]), &wanted).is_empty());
    }

    #[test]
    fn a_changed_model_reuses_the_obsolete_slice() {
        let changes = plan(&stored(&[("s1", &["a"])]), &[model(&["a", "b"])]);
        assert_eq!(
            changes,
            [SliceChange::Update("s1".into(), model(&["a", "b"]))]
        );
    }

    #[test]
    fn new_models_are_created_and_leftover_slices_deleted() {
        let changes = plan(&[], &[model(&["a"])]);
        assert_eq!(changes, [SliceChange::Create(model(&["a"]))]);
        let changes = plan(
            &stored(&[("s1", &["a"]), ("s2", &["x"]), ("s3", &["y"])]),
            &[model(&["a"]), model(&["b"])],
        );
        assert_eq!(
            changes,
            [
                SliceChange::Update("s2".into(), model(&["b"])),
                SliceChange::Delete("s3".into())
            ]
        );
        let all_gone = plan(&stored(&[("s1", &["a"])]), &[]);
        assert_eq!(all_gone, [SliceChange::Delete("s1".into())]);
    }

    #[test]
    fn two_slices_with_the_same_model_keep_only_one() {
        let changes = plan(&stored(&[("s1", &["a"]), ("s2", &["a"])]), &[model(&["a"])]);
        assert_eq!(changes, [SliceChange::Delete("s2".into())]);
    }

    #[test]
    fn a_new_slice_names_its_node_and_driver_and_is_owned_by_the_node() {
        let slice = new_slice("node-0", "uid-0", "gpu.example.com", model(&["a"]));
        assert_eq!(
            slice.metadata.generate_name.as_deref(),
            Some("node-0-gpu.example.com-")
        );
        assert_eq!(slice.node_name.as_deref(), Some("node-0"));
        assert_eq!(slice.driver_name, "gpu.example.com");
        let owner = &slice.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "uid-0"));
    }
}

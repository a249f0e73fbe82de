//! The demo's objects on a simulated 1.34 cluster (`resource.k8s.io/v1`): the DeviceClasses of
//! `deploy/overlays/kubernetes-1.34/deviceclasses.yaml` (compiled in, so the demo runs the classes
//! a cluster gets), the ResourceClaimTemplates the workload's pods use, pods in the 1.34 shape
//! (`spec.resourceClaims[].resourceClaimTemplateName`), and the wait for every node's slice.
//!
//! The templates: one GPU of any model; two GPUs of one NUMA node (`matchAttribute` on
//! `numa`); and an H100 when one is free, else any GPU (`firstAvailable`, the prioritized list).
//! There are no immediate claims on 1.34: the scheduler allocates a claim when a pod needs it.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context;
use dra_types::resource_v1::{DeviceClass, ResourceSlice};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{json, Value};

use super::setup::{NAMESPACE, ONE_GPU, TWO_GPUS};

/// The DeviceClasses of the 1.34 deployment.
pub const DEVICE_CLASSES: &str =
    include_str!("../../../../deploy/overlays/kubernetes-1.34/deviceclasses.yaml");
/// The class of every device of the driver.
pub const ALL_GPUS: &str = "gpu.dra-ledger.io";
/// The class of the H100 devices.
pub const H100: &str = "h100.gpu.dra-ledger.io";
/// The template asking for an H100, else any GPU.
pub const H100_OR_ANY: &str = "h100-or-any-gpu";

/// Creates the DeviceClasses of [`DEVICE_CLASSES`].
pub async fn create_device_classes(client: &Client) -> anyhow::Result<()> {
    let api: Api<DeviceClass> = Api::all(client.clone());
    for document in serde_yaml::Deserializer::from_str(DEVICE_CLASSES) {
        let class = DeviceClass::deserialize(document)
            .context("deploy/overlays/kubernetes-1.34/deviceclasses.yaml does not parse")?;
        let name = class.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &class)
            .await
            .with_context(|| format!("cannot create DeviceClass {name}"))?;
    }
    Ok(())
}

/// The `spec.spec` of template `name`.
fn template_spec(name: &str) -> Value {
    match name {
        TWO_GPUS => json!({"devices": {
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": ALL_GPUS, "count": 2}}],
            "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.dra-ledger.io/numa"}],
        }}),
        H100_OR_ANY => json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "h100", "deviceClassName": H100},
            {"name": "any", "deviceClassName": ALL_GPUS},
        ]}]}}),
        _ => json!({"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": ALL_GPUS}}],
        }}),
    }
}

/// The `resource.k8s.io/v1` ResourceClaimTemplate named `name`.
pub fn template(name: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": template_spec(name)},
    })
}

/// Creates the workload's templates (the pair only with `pairs`).
pub async fn create_templates(client: &Client, pairs: bool) -> anyhow::Result<()> {
    let gvk = GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaimTemplate");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk));
    let mut names = vec![ONE_GPU, H100_OR_ANY];
    if pairs {
        names.push(TWO_GPUS);
    }
    for name in names {
        let object: DynamicObject = serde_json::from_value(template(name))?;
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("cannot create ResourceClaimTemplate {name}"))?;
    }
    Ok(())
}

/// A pod in its 1.30 JSON form rewritten to the 1.34 shape: each `spec.resourceClaims[]` names
/// its claim or template itself instead of through `source`.
pub fn pod_in_1_34_shape(mut pod: Value) -> Value {
    if let Some(claims) = pod["spec"]["resourceClaims"].as_array_mut() {
        for claim in claims {
            if let Some(Value::Object(source)) =
                claim.as_object_mut().and_then(|c| c.remove("source"))
            {
                for (key, value) in source {
                    claim[key] = value;
                }
            }
        }
    }
    pod
}

/// Returns once every one of `nodes` nodes has a `resource.k8s.io/v1` slice.
pub async fn wait_for_slices(client: &Client, nodes: usize) -> anyhow::Result<()> {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    loop {
        let listed = slices.list(&ListParams::default()).await?;
        let published: BTreeSet<_> = listed
            .items
            .iter()
            .filter_map(|s| s.spec.node_name.as_deref())
            .collect();
        if published.len() >= nodes {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_classes_are_the_deployments_and_select_by_cel() {
        let names: Vec<String> = serde_yaml::Deserializer::from_str(DEVICE_CLASSES)
            .map(|d| {
                let class = DeviceClass::deserialize(d).unwrap();
                assert!(!class.spec.selectors.is_empty());
                class.metadata.name.unwrap()
            })
            .collect();
        assert!(names.contains(&ALL_GPUS.to_owned()), "{names:?}");
        assert!(names.contains(&H100.to_owned()), "{names:?}");
    }

    #[test]
    fn templates_name_existing_classes_and_the_numa_constraint() {
        let pair = template(TWO_GPUS);
        assert_eq!(
            pair["spec"]["spec"]["devices"]["constraints"][0]["matchAttribute"],
            "gpu.dra-ledger.io/numa"
        );
        let prioritized = template(H100_OR_ANY);
        let choices = &prioritized["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"];
        assert_eq!(choices[0]["deviceClassName"], H100);
        assert_eq!(choices[1]["deviceClassName"], ALL_GPUS);
    }

    #[test]
    fn pods_name_their_templates_directly_in_the_1_34_shape() {
        let pod = json!({"spec": {"resourceClaims": [
            {"name": "gpu-0", "source": {"resourceClaimTemplateName": "one-gpu"}},
            {"name": "gpu-1", "source": {"resourceClaimName": "shared"}},
        ]}});
        let pod = pod_in_1_34_shape(pod);
        assert_eq!(
            pod["spec"]["resourceClaims"],
            json!([
                {"name": "gpu-0", "resourceClaimTemplateName": "one-gpu"},
                {"name": "gpu-1", "resourceClaimName": "shared"},
            ])
        );
    }
}

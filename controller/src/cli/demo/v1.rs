//! The demo's objects on a simulated 1.34 cluster (`resource.k8s.io/v1`): the DeviceClasses of
//! `deploy/overlays/kubernetes-1.34/deviceclasses.yaml` (compiled in, so the demo runs the classes
//! a cluster gets; under another `--driver-name` the deployment's driver name is replaced by that
//! one in their names and selectors), the ResourceClaimTemplates the workload's pods use, pods in
//! the 1.34 shape (`spec.resourceClaims[].resourceClaimTemplateName`), and the wait for every
//! node's slice.
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
use crate::cli::DEFAULT_DRIVER_NAME;

/// The DeviceClasses of the 1.34 deployment, for the driver [`DEFAULT_DRIVER_NAME`].
pub const DEVICE_CLASSES: &str =
    include_str!("../../../../deploy/overlays/kubernetes-1.34/deviceclasses.yaml");
/// The template asking for an H100, else any GPU.
pub const H100_OR_ANY: &str = "h100-or-any-gpu";

/// The class of every device of `driver` (named after the driver).
pub fn all_gpus(driver: &str) -> String {
    driver.to_owned()
}

/// The class of the H100 devices of `driver`.
pub fn h100(driver: &str) -> String {
    format!("h100.{driver}")
}

/// The DeviceClasses of [`DEVICE_CLASSES`] for `driver`: the deployment's driver name replaced
/// in the class names, the driver checks and the attribute domains.
pub fn device_classes(driver: &str) -> String {
    DEVICE_CLASSES.replace(DEFAULT_DRIVER_NAME, driver)
}

/// Creates the DeviceClasses of [`device_classes`].
pub async fn create_device_classes(client: &Client, driver: &str) -> anyhow::Result<()> {
    let api: Api<DeviceClass> = Api::all(client.clone());
    for document in serde_yaml::Deserializer::from_str(&device_classes(driver)) {
        let class = DeviceClass::deserialize(document)
            .context("deploy/overlays/kubernetes-1.34/deviceclasses.yaml does not parse")?;
        let name = class.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &class)
            .await
            .with_context(|| format!("cannot create DeviceClass {name}"))?;
    }
    Ok(())
}

/// The `spec.spec` of template `name` for the devices of `driver`.
fn template_spec(name: &str, driver: &str) -> Value {
    let all = all_gpus(driver);
    match name {
        TWO_GPUS => json!({"devices": {
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": all, "count": 2}}],
            "constraints": [{"requests": ["gpus"], "matchAttribute": format!("{driver}/numa")}],
        }}),
        H100_OR_ANY => json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "h100", "deviceClassName": h100(driver)},
            {"name": "any", "deviceClassName": all},
        ]}]}}),
        _ => json!({"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": all}}],
        }}),
    }
}

/// The `resource.k8s.io/v1` ResourceClaimTemplate named `name` for the devices of `driver`.
pub fn template(name: &str, driver: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": template_spec(name, driver)},
    })
}

/// Creates the workload's templates for the devices of `driver` (the pair only with `pairs`).
pub async fn create_templates(client: &Client, driver: &str, pairs: bool) -> anyhow::Result<()> {
    let gvk = GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaimTemplate");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk));
    let mut names = vec![ONE_GPU, H100_OR_ANY];
    if pairs {
        names.push(TWO_GPUS);
    }
    for name in names {
        let object: DynamicObject = serde_json::from_value(template(name, driver))?;
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

    /// The classes of [`device_classes`] for `driver`: name and CEL expressions.
    fn classes(driver: &str) -> Vec<(String, Vec<String>)> {
        serde_yaml::Deserializer::from_str(&device_classes(driver))
            .map(|d| {
                let class = DeviceClass::deserialize(d).unwrap();
                let expressions = (class.spec.selectors.iter())
                    .filter_map(|s| Some(s.cel.as_ref()?.expression.clone()));
                (class.metadata.name.unwrap(), expressions.collect())
            })
            .collect()
    }

    #[test]
    fn the_compiled_in_classes_are_the_deployments_and_select_by_cel() {
        let classes = classes(DEFAULT_DRIVER_NAME);
        let names: Vec<&str> = classes.iter().map(|(name, _)| name.as_str()).collect();
        assert!(names.contains(&"gpu.dra-ledger.io"), "{names:?}");
        assert!(names.contains(&"h100.gpu.dra-ledger.io"), "{names:?}");
        assert!(classes.iter().all(|(_, cel)| !cel.is_empty()));
    }

    #[test]
    fn under_another_driver_name_the_classes_select_that_drivers_devices() {
        let classes = classes("gpu.example.com");
        let names: Vec<&str> = classes.iter().map(|(name, _)| name.as_str()).collect();
        assert!(names.contains(&"gpu.example.com"), "{names:?}");
        assert!(names.contains(&"h100.gpu.example.com"), "{names:?}");
        for (name, cel) in &classes {
            assert!(
                cel[0].starts_with(r#"device.driver == "gpu.example.com""#),
                "{name}: {cel:?}"
            );
            assert!(!cel[0].contains("dra-ledger"), "{name}: {cel:?}");
        }
    }

    #[test]
    fn templates_name_the_drivers_classes_and_numa_attribute() {
        for driver in [DEFAULT_DRIVER_NAME, "gpu.example.com"] {
            let pair = template(TWO_GPUS, driver);
            assert_eq!(
                pair["spec"]["spec"]["devices"]["constraints"][0]["matchAttribute"],
                format!("{driver}/numa")
            );
            let prioritized = template(H100_OR_ANY, driver);
            let choices = &prioritized["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"];
            assert_eq!(choices[0]["deviceClassName"], format!("h100.{driver}"));
            assert_eq!(choices[1]["deviceClassName"], driver);
            let names: Vec<String> = classes(driver).into_iter().map(|(n, _)| n).collect();
            assert!(names.contains(&h100(driver)) && names.contains(&all_gpus(driver)));
        }
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

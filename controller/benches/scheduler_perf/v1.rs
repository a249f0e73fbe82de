//! The objects of the 1.34 workloads (`resource.k8s.io/v1`): device class `gpu`, claim templates that ask the
//! kube-scheduler for one device of class `gpu` (any, or on NUMA node 0 or 1 by a CEL selector
//! on the slices the simulator publishes), and pods in their 1.34 shape.

use dra_types::resource_v1::DeviceClass;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

/// `resource.k8s.io/v1` `ResourceClaimTemplate`.
fn templates(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: "ResourceClaimTemplate".into(),
        plural: "resourceclaimtemplates".into(),
    };
    Api::default_namespaced_with(client.clone(), &resource)
}

/// The claim spec of one device of class `gpu` meeting `selectors`.
fn one_device(selectors: &[String]) -> Value {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|expression| json!({"cel": {"expression": expression}}))
        .collect();
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu", "selectors": selectors}}]}})
}

/// `DeviceClass` `gpu` (every device of `driver`) and templates `gpu-one`, `numa0-one` and
/// `numa1-one`, as the 1.30 workloads have them.
pub async fn prepare(client: &Client, driver: &str) -> anyhow::Result<()> {
    let class = DeviceClass::with_cel("gpu", &[&format!("device.driver == {driver:?}")]);
    Api::<DeviceClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await?;
    let numa = |n: u32| format!("device.attributes[{driver:?}].numa == {n}");
    for (name, spec) in [
        ("gpu-one", one_device(&[])),
        ("numa0-one", one_device(&[numa(0)])),
        ("numa1-one", one_device(&[numa(1)])),
    ] {
        let template: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": spec},
        }))?;
        templates(client)
            .create(&PostParams::default(), &template)
            .await?;
    }
    Ok(())
}

/// Pod `name` whose pod claims `(name, template)` are made from templates, in the 1.34 shape
/// (`resourceClaimTemplateName` directly in the pod claim).
pub fn pod(name: &str, claims: &[(&str, &str)]) -> DynamicObject {
    let pod_claims: Vec<Value> = claims
        .iter()
        .map(|(claim, template)| json!({"name": claim, "resourceClaimTemplateName": template}))
        .collect();
    let uses: Vec<Value> = claims.iter().map(|(c, _)| json!({"name": c})).collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": uses}}],
            "resourceClaims": pod_claims,
        },
    }))
    .expect("a pod object")
}

//! The demo's cluster objects: the parameter CRDs (from `dra_controller::params::crd_manifests`), a
//! ResourceClass of our driver with its DeviceClassParameters, DeviceClaimParameters, the
//! ResourceClaimTemplates the workload's pods use, and the immediate claims; the wait for the
//! node agents' devices.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec, ResourceClass, ResourceClassParametersReference, ResourceSlice,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use serde::Deserialize;

use dra_controller::params::{
    crd_manifests, DeviceClaimParameters, DeviceClaimParametersSpec, DeviceClassParameters,
    DeviceClassParametersSpec, API_GROUP,
};

/// Namespace of the demo's objects.
pub const NAMESPACE: &str = "default";
/// The ResourceClass of the demo.
pub const CLASS: &str = "gpu";
/// Template of a claim for one device.
pub const ONE_GPU: &str = "one-gpu";
/// Template of a claim for two devices on the same NUMA node.
pub const TWO_GPUS: &str = "two-gpus-same-numa";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

/// Applies the CRDs of the parameter objects.
pub async fn apply_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for document in serde_yaml::Deserializer::from_str(&crd_manifests()) {
        let crd = CustomResourceDefinition::deserialize(document)
            .context("the generated CRD manifests do not parse")?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &crd)
            .await
            .with_context(|| format!("cannot create CRD {name}"))?;
    }
    Ok(())
}

/// Creates `object` through `api`, retrying briefly while a just-created CRD is not served yet.
async fn create_retrying<K>(api: &Api<K>, object: &K, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut attempts = 0;
    loop {
        match api.create(&PostParams::default(), object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 && attempts < 50 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(error).with_context(|| format!("cannot create {what}")),
        }
    }
}

/// Creates the class, its parameters, the claim parameters and the templates. `pairs` adds the
/// parameters and template of the two-device claim.
pub async fn create_classes_and_templates(
    client: &Client,
    driver_name: &str,
    pairs: bool,
) -> anyhow::Result<()> {
    let class_params = DeviceClassParameters::new(
        CLASS,
        DeviceClassParametersSpec {
            policy: Some("Pack".to_owned()),
            ..DeviceClassParametersSpec::default()
        },
    );
    create_retrying(
        &Api::all(client.clone()),
        &class_params,
        "DeviceClassParameters",
    )
    .await?;
    let class = ResourceClass {
        metadata: meta(CLASS, None),
        driver_name: driver_name.to_owned(),
        parameters_ref: Some(ResourceClassParametersReference {
            api_group: Some(API_GROUP.to_owned()),
            kind: "DeviceClassParameters".to_owned(),
            name: CLASS.to_owned(),
            namespace: None,
        }),
        ..ResourceClass::default()
    };
    create_retrying(&Api::all(client.clone()), &class, "ResourceClass").await?;

    let mut claim_kinds = vec![(
        ONE_GPU,
        DeviceClaimParametersSpec {
            count: Some(1),
            ..DeviceClaimParametersSpec::default()
        },
    )];
    if pairs {
        claim_kinds.push((
            TWO_GPUS,
            DeviceClaimParametersSpec {
                count: Some(2),
                same_attribute: Some("numa".to_owned()),
                ..DeviceClaimParametersSpec::default()
            },
        ));
    }
    let params_api: Api<DeviceClaimParameters> = Api::namespaced(client.clone(), NAMESPACE);
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), NAMESPACE);
    for (name, spec) in claim_kinds {
        let mut params = DeviceClaimParameters::new(name, spec);
        params.metadata.namespace = Some(NAMESPACE.to_owned());
        create_retrying(&params_api, &params, "DeviceClaimParameters").await?;
        let template = ResourceClaimTemplate {
            metadata: meta(name, Some(NAMESPACE)),
            spec: ResourceClaimTemplateSpec {
                metadata: None,
                spec: claim_spec(name, None),
            },
        };
        create_retrying(&templates, &template, "ResourceClaimTemplate").await?;
    }
    Ok(())
}

fn claim_spec(params: &str, allocation_mode: Option<&str>) -> ResourceClaimSpec {
    ResourceClaimSpec {
        resource_class_name: CLASS.to_owned(),
        allocation_mode: allocation_mode.map(str::to_owned),
        parameters_ref: Some(ResourceClaimParametersReference {
            api_group: Some(API_GROUP.to_owned()),
            kind: "DeviceClaimParameters".to_owned(),
            name: params.to_owned(),
        }),
    }
}

/// Name of immediate claim number `index`.
pub fn immediate_claim_name(index: usize) -> String {
    format!("immediate-{index}")
}

/// Waits until `nodes` nodes publish their devices (one `ResourceSlice` each, written by the
/// simulated kubelet from each node agent's inventory).
pub async fn wait_for_slices(client: &Client, nodes: usize) -> anyhow::Result<()> {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    loop {
        let listed = slices.list(&kube::api::ListParams::default()).await?;
        let published: std::collections::BTreeSet<_> = listed
            .items
            .iter()
            .filter_map(|s| s.node_name.as_deref())
            .collect();
        if published.len() >= nodes {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates `count` claims for one device with allocation mode `Immediate`.
pub async fn create_immediate_claims(client: &Client, count: usize) -> anyhow::Result<()> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), NAMESPACE);
    for index in 0..count {
        let claim = ResourceClaim {
            metadata: meta(&immediate_claim_name(index), Some(NAMESPACE)),
            spec: claim_spec(ONE_GPU, Some("Immediate")),
            status: None,
        };
        api.create(&PostParams::default(), &claim)
            .await
            .context("cannot create an immediate claim")?;
    }
    Ok(())
}

/// Deletes the immediate claims (the controller deallocates them and removes its finalizer).
pub async fn delete_immediate_claims(client: &Client, count: usize) -> anyhow::Result<()> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), NAMESPACE);
    for index in 0..count {
        match api
            .delete(
                &immediate_claim_name(index),
                &kube::api::DeleteParams::default(),
            )
            .await
        {
            Ok(_) | Err(kube::Error::Api(kube::core::ErrorResponse { code: 404, .. })) => {}
            Err(error) => return Err(error).context("cannot delete an immediate claim"),
        }
    }
    Ok(())
}

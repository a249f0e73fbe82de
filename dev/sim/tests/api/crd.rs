//! `CustomResourceDefinitions`: after creation the custom resource is served, discoverable and
//! honours its scope and status subresource; removal stops serving it.

use crate::api_support::{api_error, create, start, widget_crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use kube::discovery::Discovery;
use serde_json::json;

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", kind), plural)
}

#[tokio::test]
async fn created_crd_is_established_and_its_resource_served_with_status() {
    let (server, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = create(&crds, &widget_crd("Namespaced", "widgets", "Widget")).await;
    let conditions = crd.status.unwrap().conditions.unwrap();
    assert!(conditions
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True"));

    let ar = resource("Widget", "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut w = DynamicObject::new("w1", &ar);
    w.data = json!({"spec": {"size": 1}, "status": {"ready": true}});
    let created = create(&widgets, &w).await;
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create with a status subresource"
    );
    assert_eq!(created.metadata.generation, Some(1));

    let spec = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));
    let status = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["ready"], true);
    assert_eq!(
        status.metadata.generation,
        Some(2),
        "status writes do not bump generation"
    );

    let err = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (415, "UnsupportedMediaType".into()));

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (found, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
        .expect("discoverable");
    assert_eq!(found.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let err = widgets.get("w1").await.unwrap_err();
    assert_eq!(api_error(&err).0, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn cluster_scoped_custom_resources_have_no_namespace() {
    let (server, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    create(&crds, &widget_crd("Cluster", "gadgets", "Gadget")).await;
    let ar = resource("Gadget", "gadgets");
    let gadgets: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let g = create(&gadgets, &DynamicObject::new("g1", &ar)).await;
    assert_eq!(g.metadata.namespace, None);
    assert_eq!(
        gadgets
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_crd_is_rejected() {
    let (server, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let mut bad = widget_crd("Namespaced", "widgets", "Widget");
    bad.metadata.name = Some("wrong.example.com".into());
    let err = crds
        .create(&kube::api::PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn custom_resource_put_requires_a_resource_version() {
    let (server, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    create(&crds, &widget_crd("Namespaced", "widgets", "Widget")).await;
    let ar = resource("Widget", "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let mut w = create(&widgets, &DynamicObject::new("w", &ar)).await;
    w.metadata.resource_version = None;
    let err = widgets
        .replace("w", &kube::api::PostParams::default(), &w)
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    server.shutdown().await;
}

//! The status subresource rules, pod binding and the strategic merges DRA components rely on.

use crate::api_support::{api_error, claim, create, pod, scheduling_context, start};
use k8s_openapi::api::core::v1::{Binding, Pod};
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

fn allocated_status(reserved: &serde_json::Value) -> serde_json::Value {
    json!({"status": {
        "driverName": "gpu.example.com",
        "allocation": {"shareable": true, "resourceHandles": [{"driverName": "gpu.example.com", "data": "x"}]},
        "reservedFor": reserved,
    }})
}

fn consumer(name: &str, uid: &str) -> serde_json::Value {
    json!({"resource": "pods", "name": name, "uid": uid})
}

#[tokio::test]
async fn main_resource_write_ignores_status_and_status_write_ignores_the_rest() {
    let (server, client) = start().await;
    let claims: Api<ResourceClaim> = Api::default_namespaced(client);
    let created = create(&claims, &claim("c")).await;
    assert!(created.status.is_none(), "status is cleared on create");

    let mut with_status = created.clone();
    with_status.status = serde_json::from_value(json!({"driverName": "d"})).unwrap();
    with_status.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let updated = claims
        .replace("c", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(updated.status.is_none(), "main write must not set status");
    assert_eq!(updated.metadata.labels.as_ref().unwrap()["a"], "b");

    let status_patch = json!({
        "metadata": {"labels": {"a": "changed"}},
        "spec": {"resourceClassName": "other"},
        "status": {"driverName": "d"},
    });
    let after = claims
        .patch_status("c", &PatchParams::default(), &Patch::Merge(&status_patch))
        .await
        .unwrap();
    assert_eq!(after.status.unwrap().driver_name.as_deref(), Some("d"));
    assert_eq!(after.spec.resource_class_name, "gpu");
    assert_eq!(after.metadata.labels.unwrap()["a"], "b");
    server.shutdown().await;
}

/// Applies `patch` to the status of claim `c` as a strategic merge; the UIDs in `reservedFor`
/// after it.
async fn reserved_after(claims: &Api<ResourceClaim>, patch: &Value) -> Vec<String> {
    let after = claims
        .patch_status("c", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    after
        .status
        .unwrap()
        .reserved_for
        .unwrap()
        .into_iter()
        .map(|r| r.uid)
        .collect()
}

#[tokio::test]
async fn reserved_for_merges_by_uid_under_strategic_patch() {
    let (server, client) = start().await;
    let claims: Api<ResourceClaim> = Api::default_namespaced(client);
    create(&claims, &claim("c")).await;
    let pp = PatchParams::default();
    claims
        .patch_status(
            "c",
            &pp,
            &Patch::Merge(&allocated_status(&json!([consumer("a", "uid-a")]))),
        )
        .await
        .unwrap();
    let add_b = json!({"status": {"reservedFor": [consumer("b", "uid-b")]}});
    assert_eq!(
        reserved_after(&claims, &add_b).await,
        vec!["uid-a", "uid-b"]
    );
    let remove_a = json!({"status": {"reservedFor": [{"uid": "uid-a", "$patch": "delete"}]}});
    assert_eq!(reserved_after(&claims, &remove_a).await, vec!["uid-b"]);
    server.shutdown().await;
}

#[tokio::test]
async fn claim_status_invariants_are_enforced() {
    let (server, client) = start().await;
    let claims: Api<ResourceClaim> = Api::default_namespaced(client);
    create(&claims, &claim("c")).await;
    let pp = PatchParams::default();
    let reserved_unallocated = json!({"status": {"reservedFor": [consumer("a", "uid-a")]}});
    let err = claims
        .patch_status("c", &pp, &Patch::Merge(&reserved_unallocated))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    claims
        .patch_status("c", &pp, &Patch::Merge(&allocated_status(&json!([]))))
        .await
        .unwrap();
    let changed = json!({"status": {"allocation": {"shareable": false}}});
    let err = claims
        .patch_status("c", &pp, &Patch::Merge(&changed))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    let dealloc = json!({"status": {"deallocationRequested": true}});
    claims
        .patch_status("c", &pp, &Patch::Merge(&dealloc))
        .await
        .unwrap();
    let reserve = json!({"status": {"reservedFor": [consumer("a", "uid-a")]}});
    let err = claims
        .patch_status("c", &pp, &Patch::Merge(&reserve))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    let clear =
        json!({"status": {"allocation": null, "driverName": null, "deallocationRequested": null}});
    claims
        .patch_status("c", &pp, &Patch::Merge(&clear))
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn scheduling_context_claims_merge_by_name() {
    let (server, client) = start().await;
    let contexts: Api<PodSchedulingContext> = Api::default_namespaced(client);
    create(&contexts, &scheduling_context("p")).await;
    let pp = PatchParams::default();
    let first = json!({"status": {"resourceClaims": [{"name": "gpu", "unsuitableNodes": ["n1"]}]}});
    contexts
        .patch_status("p", &pp, &Patch::Strategic(&first))
        .await
        .unwrap();
    let second = json!({"status": {"resourceClaims": [{"name": "nic", "unsuitableNodes": []}, {"name": "gpu", "unsuitableNodes": ["n2"]}]}});
    let after = contexts
        .patch_status("p", &pp, &Patch::Strategic(&second))
        .await
        .unwrap();
    let claims = after.status.unwrap().resource_claims.unwrap();
    let names: Vec<&str> = claims
        .iter()
        .map(|c| c.name.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(names, vec!["gpu", "nic"]);
    assert_eq!(
        claims[0].unsuitable_nodes.as_deref(),
        Some(&["n2".to_string()][..])
    );
    server.shutdown().await;
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    create(&pods, &pod("p")).await;
    let binding: Binding = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }))
    .unwrap();
    let bind = |b: Binding| {
        let client = client.clone();
        async move {
            let body = serde_json::to_vec(&b).unwrap();
            let req = http::Request::post("/api/v1/namespaces/default/pods/p/binding")
                .header("content-type", "application/json")
                .body(body)
                .unwrap();
            client.request::<serde_json::Value>(req).await
        }
    };
    bind(binding.clone()).await.unwrap();
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let scheduled = bound.status.unwrap().conditions.unwrap();
    assert!(scheduled
        .iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    let err = bind(binding).await.unwrap_err();
    assert_eq!(api_error(&err), (409, "Conflict".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn finalizers_merge_as_a_set_under_strategic_patch() {
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &pod("p")).await;
    let pp = PatchParams::default();
    pods.patch(
        "p",
        &pp,
        &Patch::Strategic(json!({"metadata": {"finalizers": ["a"]}})),
    )
    .await
    .unwrap();
    let after = pods
        .patch(
            "p",
            &pp,
            &Patch::Strategic(json!({"metadata": {"finalizers": ["b", "a"]}})),
        )
        .await
        .unwrap();
    assert_eq!(after.metadata.finalizers.unwrap(), vec!["a", "b"]);
    server.shutdown().await;
}

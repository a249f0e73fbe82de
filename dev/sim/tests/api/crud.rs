//! Create, get, update and error semantics of the simulated API server through the real kube client.

use crate::api_support::{api_error, claim, config_map, create, pod, raw, start};
use crate::raw_http::send_with;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

#[tokio::test]
async fn create_fills_server_fields_and_generate_name() {
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut p = pod("");
    p.metadata.name = None;
    p.metadata.generate_name = Some("web-".into());
    let a = create(&pods, &p).await;
    let b = create(&pods, &p).await;
    let (na, nb) = (
        a.metadata.name.clone().unwrap(),
        b.metadata.name.clone().unwrap(),
    );
    assert!(na.starts_with("web-") && na.len() == 9, "{na}");
    assert_ne!(na, nb);
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    let rv_a: u64 = a.metadata.resource_version.unwrap().parse().unwrap();
    let rv_b: u64 = b.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv_b > rv_a);
    assert_eq!(a.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        a.spec.unwrap().scheduler_name.as_deref(),
        Some("default-scheduler")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn namespaced_create_requires_an_existing_namespace() {
    let (server, client) = start().await;
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = missing
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (404, "NotFound".into()));
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": "team-a"}})).unwrap();
    let created = create(&nss, &ns).await;
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let cms: Api<ConfigMap> = Api::namespaced(client, "team-a");
    create(&cms, &config_map("a", &[])).await;
    server.shutdown().await;
}

#[tokio::test]
async fn errors_carry_kubernetes_codes_and_reasons() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    create(&cms, &config_map("dup", &[])).await;
    let dup = cms
        .create(&PostParams::default(), &config_map("dup", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(&dup), (409, "AlreadyExists".into()));
    let missing = cms.get("absent").await.unwrap_err();
    assert_eq!(api_error(&missing), (404, "NotFound".into()));
    let bad_name = cms
        .create(&PostParams::default(), &config_map("Bad_Name", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(&bad_name), (422, "Invalid".into()));
    if let kube::Error::Api(resp) = &bad_name {
        assert!(resp.message.contains("metadata.name"), "{}", resp.message);
    }
    let bad_label = cms
        .create(
            &PostParams::default(),
            &config_map("ok", &[("app", "not valid!")]),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&bad_label), (422, "Invalid".into()));

    let path = "/api/v1/namespaces/default/configmaps";
    let (code, body) = raw(&client, "POST", path, "application/json", "{not json").await;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    let (code, body) = raw(
        &client,
        "PATCH",
        &format!("{path}/dup"),
        "application/apply-patch+yaml",
        "{}",
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let (code, body) = raw(&client, "PUT", path, "application/json", "{}").await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let (code, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/widgets",
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn stale_update_conflicts_and_fresh_update_succeeds() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = create(&cms, &config_map("c", &[])).await;
    let mut fresh = first.clone();
    fresh.data = Some([("k".to_string(), "v2".to_string())].into());
    let updated = cms
        .replace("c", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        first.metadata.resource_version
    );
    let mut stale = first;
    stale.data = Some([("k".to_string(), "v3".to_string())].into());
    let err = cms
        .replace("c", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (409, "Conflict".into()));
    assert_eq!(cms.get("c").await.unwrap().data.unwrap()["k"], "v2");
    server.shutdown().await;
}

#[tokio::test]
async fn unchanged_update_keeps_the_resource_version() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = create(&cms, &config_map("same", &[])).await;
    let again = cms
        .replace("same", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        first.metadata.resource_version
    );
    server.shutdown().await;
}

#[tokio::test]
async fn resource_versions_only_grow_and_lists_report_the_latest() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut last = 0u64;
    for i in 0..5 {
        let c = create(&cms, &config_map(&format!("c{i}"), &[])).await;
        let rv: u64 = c.metadata.resource_version.unwrap().parse().unwrap();
        assert!(rv > last);
        last = rv;
    }
    let listed = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed
            .metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        server.store().resource_version()
    );
    assert!(server.store().resource_version() >= last);
    server.shutdown().await;
}

/// kube-apiserver answers a JSON patch whose `test` fails (or whose path is missing) with its
/// generic 422: reason `Invalid`, a fixed message, empty details; the object is unchanged.
#[tokio::test]
async fn a_json_patch_that_does_not_apply_gets_the_generic_422() {
    let (server, client) = start().await;
    let claims: Api<ResourceClaim> = Api::default_namespaced(client);
    let c = create(&claims, &claim("c1")).await;
    let version = c.metadata.resource_version.clone().unwrap();
    let stale = serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": format!("1{version}")},
        {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},
    ]);
    let missing =
        serde_json::json!([{"op": "replace", "path": "/status/reservedFor/3", "value": {}}]);
    for body in [&stale, &missing] {
        let answer = send_with(
            server.addr(),
            "PATCH",
            "/apis/resource.k8s.io/v1alpha2/namespaces/default/resourceclaims/c1",
            Some(body),
            &[("Content-Type", "application/json-patch+json")],
        )
        .await;
        let status = answer.json();
        assert_eq!(answer.code, 422, "{body}: {status}");
        assert_eq!(status["reason"], "Invalid", "{status}");
        assert_eq!(
            status["message"],
            "the server rejected our request due to an error in our request"
        );
        assert_eq!(status["details"], serde_json::json!({}), "{status}");
    }
    let after = claims.get("c1").await.unwrap();
    assert_eq!(after.metadata.resource_version, Some(version));
    assert_eq!(after.metadata.labels, None);
    server.shutdown().await;
}

#[tokio::test]
async fn resource_claim_defaults_and_immutable_spec() {
    let (server, client) = start().await;
    let claims: Api<ResourceClaim> = Api::default_namespaced(client);
    let c = create(&claims, &claim("c1")).await;
    assert_eq!(
        c.spec.allocation_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    let patch = serde_json::json!({"spec": {"resourceClassName": "other"}});
    let err = claims
        .patch("c1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    let typed: Option<ResourceClaim> = server.store().get_typed(Some("default"), "c1").unwrap();
    assert_eq!(typed.unwrap().spec.resource_class_name, "gpu");
    server.shutdown().await;
}

#[tokio::test]
async fn pod_spec_is_immutable_except_images() {
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &pod("p")).await;
    let image =
        serde_json::json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}});
    pods.patch("p", &PatchParams::default(), &Patch::Strategic(&image))
        .await
        .unwrap();
    let node = serde_json::json!({"spec": {"nodeName": "n1"}});
    let err = pods
        .patch("p", &PatchParams::default(), &Patch::Merge(&node))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn events_written_through_either_api_are_visible_in_both() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let (server, client) = start().await;
    let events: Api<Event> = Api::default_namespaced(client.clone());
    let ev: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e1"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "scheduled",
        "reason": "Scheduled",
        "type": "Normal",
        "action": "Binding",
        "reportingController": "sched",
        "reportingInstance": "sched-1",
    }))
    .unwrap();
    create(&events, &ev).await;
    let core: Api<CoreEvent> = Api::default_namespaced(client.clone());
    let seen = core.get("e1").await.unwrap();
    assert_eq!(seen.message.as_deref(), Some("scheduled"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("p"));
    let by_object = core
        .list(&ListParams::default().fields("involvedObject.name=p"))
        .await
        .unwrap();
    assert_eq!(by_object.items.len(), 1);
    let patched = events
        .patch(
            "e1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"note": "again"})),
        )
        .await
        .unwrap();
    assert_eq!(patched.note.as_deref(), Some("again"));
    assert_eq!(
        core.get("e1").await.unwrap().message.as_deref(),
        Some("again")
    );
    server.shutdown().await;
}

//! Admin access on the `v1` releases as the API server admits it: a claim or template asking for
//! `adminAccess: true`, and a claim status granting it, only in a namespace labelled
//! `resource.kubernetes.io/admin-access: "true"` (422 naming the field otherwise), and nothing
//! to check where `DRAAdminAccess` is off (the field is dropped first).

use std::net::SocketAddr;

use dra_sim::server::{ServerConfig, SimServer, SimServerHandle};
use dra_sim::{ApiOverrides, KubernetesVersion};
use serde_json::{json, Value};

use crate::raw_http::send;

const MESSAGE: &str = "admin access to devices requires the \
                       `resource.kubernetes.io/admin-access: true` label on the containing namespace";

async fn start(version: KubernetesVersion, gates: &str) -> SimServerHandle {
    SimServer::start(ServerConfig {
        kubernetes_version: version,
        api: ApiOverrides {
            feature_gates: gates.parse().unwrap(),
            ..ApiOverrides::default()
        },
        ..ServerConfig::default()
    })
    .await
    .expect("server starts")
}

async fn namespace(addr: SocketAddr, name: &str, admin: bool) {
    let labels = if admin {
        json!({"resource.kubernetes.io/admin-access": "true"})
    } else {
        json!({})
    };
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    let answer = send(addr, "POST", "/api/v1/namespaces", Some(&ns)).await;
    assert_eq!(answer.code, 201, "{}", answer.body);
}

fn spec() -> Value {
    json!({"devices": {"requests": [
        {"name": "plain", "exactly": {"deviceClassName": "gpu"}},
        {"name": "monitor", "exactly": {"deviceClassName": "gpu", "adminAccess": true}}]}})
}

fn claims(ns: &str) -> String {
    format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
}

async fn create_claim(addr: SocketAddr, ns: &str, name: &str) -> crate::raw_http::Answer {
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name}, "spec": spec()});
    send(addr, "POST", &claims(ns), Some(&claim)).await
}

#[tokio::test]
async fn admin_access_claims_and_templates_need_the_namespace_label() {
    for version in KubernetesVersion::v1_releases() {
        let server = start(version, "").await;
        let addr = server.addr();
        namespace(addr, "team", false).await;
        namespace(addr, "ops", true).await;

        let refused = create_claim(addr, "team", "monitor").await;
        assert_eq!(refused.code, 422, "{version}: {}", refused.body);
        let status = refused.json();
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(
            status["message"],
            format!(
                "ResourceClaim.resource.k8s.io \"monitor\" is invalid: \
                 spec.devices.requests[1].adminAccess: Forbidden: {MESSAGE}"
            )
        );
        assert_eq!(
            status["details"]["causes"],
            json!([{"reason": "FieldValueForbidden",
                "message": format!("Forbidden: {MESSAGE}"),
                "field": "spec.devices.requests[1].adminAccess"}])
        );

        let template = json!({"apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate", "metadata": {"name": "monitor"},
            "spec": {"spec": spec()}});
        let path = "/apis/resource.k8s.io/v1/namespaces/team/resourceclaimtemplates";
        let refused = send(addr, "POST", path, Some(&template)).await;
        assert_eq!(refused.code, 422, "{version}: {}", refused.body);
        assert_eq!(
            refused.json()["details"]["causes"][0]["field"],
            "spec.devices.requests[1].adminAccess"
        );
        let path = "/apis/resource.k8s.io/v1/namespaces/ops/resourceclaimtemplates";
        assert_eq!(send(addr, "POST", path, Some(&template)).await.code, 201);

        let accepted = create_claim(addr, "ops", "monitor").await;
        assert_eq!(accepted.code, 201, "{version}: {}", accepted.body);
        assert_eq!(
            accepted.json()["spec"]["devices"]["requests"][1]["exactly"]["adminAccess"],
            true
        );
    }
}

async fn merge_patch(addr: SocketAddr, path: &str, body: &Value) -> crate::raw_http::Answer {
    let headers = [("Content-Type", "application/merge-patch+json")];
    crate::raw_http::send_with(addr, "PATCH", path, Some(body), &headers).await
}

fn admin_label(value: &str) -> Value {
    let value = if value.is_empty() {
        Value::Null
    } else {
        json!(value)
    };
    json!({"metadata": {"labels": {"resource.kubernetes.io/admin-access": value}}})
}

#[tokio::test]
async fn an_allocation_granting_admin_access_needs_the_label_when_it_is_written() {
    let server = start(KubernetesVersion::V1_37, "").await;
    let addr = server.addr();
    namespace(addr, "ops", true).await;
    assert_eq!(create_claim(addr, "ops", "monitor").await.code, 201);
    // The label goes after the claim was admitted: the allocation is checked again.
    let answer = merge_patch(addr, "/api/v1/namespaces/ops", &admin_label("")).await;
    assert_eq!(answer.code, 200, "{}", answer.body);
    let allocation = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "plain", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0"},
        {"request": "monitor", "driver": "gpu.example.com", "pool": "node-0",
            "device": "gpu-0", "adminAccess": true}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}});
    let path = format!("{}/monitor/status", claims("ops"));
    let refused = merge_patch(addr, &path, &allocation).await;
    assert_eq!(refused.code, 422, "{}", refused.body);
    assert_eq!(
        refused.json()["details"]["causes"][0]["field"],
        "status.allocation.devices.results[1].adminAccess"
    );
    let answer = merge_patch(addr, "/api/v1/namespaces/ops", &admin_label("true")).await;
    assert_eq!(answer.code, 200, "{}", answer.body);
    let granted = merge_patch(addr, &path, &allocation).await;
    assert_eq!(granted.code, 200, "{}", granted.body);
    assert_eq!(
        granted.json()["status"]["allocation"]["devices"]["results"][1]["adminAccess"],
        true
    );
    // Once granted, a later status write is not refused for the label.
    let answer = merge_patch(addr, "/api/v1/namespaces/ops", &admin_label("")).await;
    assert_eq!(answer.code, 200, "{}", answer.body);
    let reserve =
        json!({"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}});
    let reserved = merge_patch(addr, &path, &reserve).await;
    assert_eq!(reserved.code, 200, "{}", reserved.body);
}

#[tokio::test]
async fn without_the_gate_the_field_is_dropped_and_nothing_is_refused() {
    // 1.34 and 1.35 let the gate be switched off; the claim loses the field and is admitted.
    let server = start(KubernetesVersion::V1_35, "DRAAdminAccess=false").await;
    let addr = server.addr();
    namespace(addr, "team", false).await;
    let created = create_claim(addr, "team", "monitor").await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert!(created.json()["spec"]["devices"]["requests"][1]["exactly"]
        .get("adminAccess")
        .is_none());
}

//! The OpenAPI document, the router and `docs/admin-api.md` agree: the document lists exactly
//! the routes below, every documented operation is served by the router, and the route table of
//! `docs/admin-api.md` names the same routes with the same token requirement.

use std::collections::BTreeSet;

use crate::support::{fixture, send, with_token, TOKEN};
use axum::http::{Method, StatusCode};
use dra_api::router;

/// Every route of the admin API.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/v1/nodes"),
    ("GET", "/v1/nodes/{node}/devices"),
    ("GET", "/v1/claims"),
    ("GET", "/v1/claims/{uid}"),
    ("GET", "/v1/intents"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/utilisation"),
    ("GET", "/v1/devices"),
    ("GET", "/v1/usage"),
    ("GET", "/v1/idle"),
    ("GET", "/v1/nodes/{node}/devices/{device}/history"),
    ("POST", "/v1/nodes/{node}/devices/{device}/cordon"),
    ("POST", "/v1/nodes/{node}/devices/{device}/uncordon"),
    ("POST", "/v1/reconcile"),
    ("GET", "/v1/backup"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/"),
    ("GET", "/ui/"),
    ("GET", "/ui/{file}"),
];

fn documented_operations(document: &serde_json::Value) -> BTreeSet<(String, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    operations
}

async fn served_document() -> serde_json::Value {
    let answer = send(
        router(fixture().state),
        Method::GET,
        "/v1/openapi.json",
        None,
        None,
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["content-type"], "application/json");
    answer.json()
}

#[tokio::test]
async fn document_lists_exactly_the_admin_routes() {
    let document = served_document().await;
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    let expected: BTreeSet<_> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(documented_operations(&document), expected);
    assert_eq!(
        serde_json::to_value(dra_api::openapi()).unwrap(),
        document,
        "the served document is the generated one"
    );
}

/// The rows of the route table of `docs/admin-api.md`: method, path without its query, and
/// whether the token column says `yes`.
fn admin_page_routes() -> BTreeSet<(String, String, bool)> {
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/admin-api.md");
    let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    text.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .map(|row| {
            let (route, rest) = row.split_once('`').unwrap();
            let (method, path) = route.split_once(' ').unwrap();
            let path = path.split('?').next().unwrap();
            let token = rest
                .trim_end()
                .trim_end_matches('|')
                .rsplit('|')
                .next()
                .unwrap();
            (method.to_owned(), path.to_owned(), token.trim() == "yes")
        })
        .collect()
}

#[test]
fn admin_api_page_lists_every_route_with_its_token_requirement() {
    let json = serde_json::to_value(dra_api::openapi()).unwrap();
    let expected: BTreeSet<_> = documented_operations(&json)
        .into_iter()
        .map(|(method, path)| {
            let protected = json["paths"][&path][method.to_lowercase()]
                .get("security")
                .is_some();
            (method, path, protected)
        })
        .collect();
    assert_eq!(admin_page_routes(), expected);
}

struct NoDrift;

#[async_trait::async_trait]
impl dra_api::Reconciler for NoDrift {
    async fn reconcile_now(
        &self,
    ) -> Result<serde_json::Value, dra_api::reconciler::ReconcileError> {
        Ok(serde_json::json!({"released": 0}))
    }
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let f = fixture();
    let state = with_token(f.state.clone()).with_reconciler(std::sync::Arc::new(NoDrift));
    let document = served_document().await;
    for (method, path) in documented_operations(&document) {
        let mut concrete = path
            .replace("{node}", "node-a")
            .replace("{device}", "gpu-0")
            .replace("{uid}", "c1")
            .replace("{file}", "page.js");
        if concrete == "/v1/devices" {
            concrete.push_str("?nodes=node-a");
        }
        let method: Method = method.parse().unwrap();
        let answer = send(
            router(state.clone()),
            method.clone(),
            &concrete,
            Some(TOKEN),
            None,
        )
        .await;
        assert_ne!(
            answer.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        if answer.status == StatusCode::NOT_FOUND {
            assert_ne!(
                answer.code(),
                "not_found",
                "{method} {path} fell through to the fallback"
            );
        }
        assert!(
            answer.status.is_success(),
            "{method} {path}: {}",
            answer.status
        );
    }
    let unknown = send(router(state), Method::GET, "/v1/nothing", None, None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn protected_operations_declare_the_bearer_scheme() {
    let document = dra_api::openapi();
    let json = serde_json::to_value(&document).unwrap();
    assert_eq!(
        json["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for (method, path) in documented_operations(&json) {
        let operation = &json["paths"][&path][method.to_lowercase()];
        let protected = method == "POST" || path == "/v1/backup";
        assert_eq!(
            operation.get("security").is_some(),
            protected,
            "{method} {path}"
        );
    }
    // Response schemas are documented from the API's own types.
    for schema in [
        "NodeList",
        "DeviceList",
        "ClaimList",
        "ClaimDetailView",
        "AdminAccessItem",
        "HealthItem",
        "AuditPage",
        "UtilisationView",
        "ErrorBody",
    ] {
        assert!(
            json["components"]["schemas"].get(schema).is_some(),
            "{schema}"
        );
    }
    // Admin-access claims are documented apart from the allocations they are listed beside.
    let schemas = &json["components"]["schemas"];
    assert!(schemas["ClaimList"]["properties"]
        .get("adminAccess")
        .is_some());
    assert!(schemas["ClaimDetailView"]["properties"]
        .get("adminAccess")
        .is_some());
    assert!(schemas["NodeItem"]["properties"]
        .get("adminAccess")
        .is_some());
    assert!(schemas["DeviceItem"]["properties"]
        .get("adminAccess")
        .is_some());
}

#[tokio::test]
async fn capacity_fields_are_documented_and_optional() {
    let json = served_document().await;
    let schemas = &json["components"]["schemas"];
    for (schema, field) in [
        ("NodeItem", "capacity"),
        ("UtilisationView", "capacityByModel"),
        ("DeviceItem", "parent"),
        ("DeviceItem", "shares"),
        ("CapacityItem", "equivalentsAllocated"),
        ("CapacityUseItem", "allocated"),
        ("ShareItem", "consumed"),
    ] {
        assert!(
            schemas[schema]["properties"].get(field).is_some(),
            "{schema}.{field}"
        );
    }
    for (schema, field) in [
        ("NodeItem", "capacity"),
        ("UtilisationView", "capacityByModel"),
        ("DeviceItem", "parent"),
        ("DeviceItem", "shares"),
    ] {
        let required = schemas[schema]["required"].as_array().unwrap();
        assert!(!required.iter().any(|r| r == field), "{schema}.{field}");
    }
}

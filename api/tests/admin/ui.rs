//! The device page and the route it draws its grid from: `GET /` and `GET /ui/` answer the
//! compiled-in page with its security and cache headers, `GET /ui/{file}` its script and
//! stylesheet, and `GET /v1/devices?nodes=...` the devices of the named nodes exactly as each
//! node's device route answers them, with the claims holding them.

use crate::support::{fixture, get, Answer};
use axum::http::StatusCode;
use dra_allocator::ledger::{AdminAccessRequest, ClaimRef};

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer.headers[name].to_str().unwrap()
}

#[tokio::test]
async fn the_page_is_served_at_the_root_and_under_ui_with_a_strict_policy_and_revalidation() {
    let f = fixture();
    let root = get(&f.state, "/").await;
    let ui = get(&f.state, "/ui/").await;
    for answer in [&root, &ui] {
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(header(answer, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(answer, "cache-control"), "no-cache");
        let policy = header(answer, "content-security-policy");
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
        ] {
            assert!(policy.contains(directive), "{policy}");
        }
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(header(answer, "x-content-type-options"), "nosniff");
    }
    assert_eq!(root.body, ui.body, "one page at both addresses");
    let html = String::from_utf8(root.body).unwrap();
    assert!(html.contains("id=\"grid\""), "{html}");
}

/// The `src` or `href` of the page that starts with `prefix`.
fn asset_url(html: &str, prefix: &str) -> String {
    let start = html
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix} in {html}"));
    let rest = &html[start..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn the_script_and_stylesheet_are_served_under_versioned_urls_and_kept_for_a_year() {
    let f = fixture();
    let html = String::from_utf8(get(&f.state, "/").await.body).unwrap();
    for (prefix, content_type) in [
        ("/ui/page.js?v=", "text/javascript; charset=utf-8"),
        ("/ui/page.css?v=", "text/css; charset=utf-8"),
    ] {
        let url = asset_url(&html, prefix);
        let answer = get(&f.state, &url).await;
        assert_eq!(answer.status, StatusCode::OK, "{url}");
        assert_eq!(header(&answer, "content-type"), content_type);
        assert!(header(&answer, "cache-control").contains("immutable"));
        assert!(!answer.body.is_empty());
    }
    let other = get(&f.state, "/ui/secret.txt").await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);
    assert_eq!(other.code(), "not_found");
}

#[tokio::test]
async fn devices_of_named_nodes_are_each_node_s_device_route_with_the_claims_holding_them() {
    let f = fixture();
    let answer = get(&f.state, "/v1/devices?nodes=node-b,node-z,node-a").await;
    assert_eq!(answer.status, StatusCode::OK);
    let grid = answer.json();
    let items = grid["items"].as_array().unwrap();
    let nodes: Vec<&str> = items.iter().map(|l| l["node"].as_str().unwrap()).collect();
    assert_eq!(nodes, ["node-b", "node-a"], "in the order named");
    for list in items {
        let node = list["node"].as_str().unwrap();
        let own = get(&f.state, &format!("/v1/nodes/{node}/devices"))
            .await
            .json();
        assert_eq!(list, &own, "{node}");
    }
    assert_eq!(grid["absent"], serde_json::json!(["node-z"]));

    let holders = grid["holders"].as_object().unwrap();
    let mut uids: Vec<&str> = holders.keys().map(String::as_str).collect();
    uids.sort_unstable();
    assert_eq!(uids, ["c1", "c2", "c3"], "the released c4 holds nothing");
    let c2 = f.ledger.allocation("c2").unwrap().unwrap();
    assert_eq!(
        holders["c2"],
        serde_json::json!({
            "namespace": "team-b",
            "name": c2.claim.name,
            "sinceMs": c2.created_ms,
            "adminAccess": false,
        })
    );
}

#[tokio::test]
async fn an_admin_access_claim_is_named_among_the_holders_as_admin_access() {
    let f = fixture();
    f.ledger
        .record_admin_access(AdminAccessRequest {
            claim: ClaimRef::new("adm-1", "ops", "look"),
            node: "node-b".to_owned(),
            devices: vec!["gpu-1".to_owned()],
        })
        .unwrap();
    let grid = get(&f.state, "/v1/devices?nodes=node-b").await.json();
    let holder = &grid["holders"]["adm-1"];
    assert_eq!(holder["namespace"], "ops");
    assert_eq!(holder["name"], "look");
    assert_eq!(holder["adminAccess"], true);
}

#[tokio::test]
async fn devices_without_a_node_or_of_too_many_nodes_are_a_bad_request() {
    let f = fixture();
    let many: Vec<String> = (0..101).map(|i| format!("node-{i}")).collect();
    for path in [
        "/v1/devices".to_owned(),
        "/v1/devices?nodes=".to_owned(),
        "/v1/devices?nodes=,,".to_owned(),
        "/v1/devices?nodes=node-a,%20node-b".to_owned(),
        format!("/v1/devices?nodes={}", many.join(",")),
    ] {
        let answer = get(&f.state, &path).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(answer.code(), "bad_request", "{path}");
    }
}

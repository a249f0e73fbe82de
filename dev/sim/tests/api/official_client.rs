//! What other clients than kube-rs send and expect (the official Python client among them): boolean
//! query parameters spelled `True`, the answer of a delete per resource, and the legacy `bindings`
//! collection. Plain HTTP, so that status codes and bodies are seen as sent.

use std::time::Duration;

use crate::api_support::start_with;
use crate::raw_http::send;
use dra_sim::server::ServerConfig;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn quick_bookmarks() -> ServerConfig {
    ServerConfig {
        bookmark_interval: Duration::from_millis(100),
        ..ServerConfig::default()
    }
}

#[tokio::test]
async fn boolean_parameters_are_false_only_for_zero_and_false_in_any_case() {
    let (server, _client) = start_with(quick_bookmarks()).await;
    let addr = server.addr();
    assert_eq!(
        send(addr, "POST", CMS, Some(&config_map("a"))).await.code,
        201
    );
    for spelled in ["True", "true", "TRUE", "1", "t", "yes"] {
        let watch = send(
            addr,
            "GET",
            &format!("{CMS}?watch={spelled}&timeoutSeconds=1"),
            None,
        )
        .await;
        let events = watch.lines();
        assert_eq!(
            events[0]["type"], "ADDED",
            "watch={spelled}: {}",
            watch.body
        );
        assert_eq!(events[0]["object"]["metadata"]["name"], "a");
    }
    for spelled in ["False", "false", "FALSE", "0"] {
        let list = send(addr, "GET", &format!("{CMS}?watch={spelled}"), None).await;
        assert_eq!(list.json()["kind"], "ConfigMapList", "watch={spelled}");
    }
    let first_wins = send(addr, "GET", &format!("{CMS}?watch=false&watch=true"), None).await;
    assert_eq!(first_wins.json()["kind"], "ConfigMapList");
    server.shutdown().await;
}

#[tokio::test]
async fn bookmarks_follow_allow_watch_bookmarks_spelled_as_python_spells_it() {
    let (server, _client) = start_with(quick_bookmarks()).await;
    let addr = server.addr();
    let watch = |allow: &'static str| {
        let path = format!("{CMS}?watch=True&allowWatchBookmarks={allow}&timeoutSeconds=1");
        async move { send(addr, "GET", &path, None).await.lines() }
    };
    let bookmarks = |events: &[Value]| events.iter().filter(|e| e["type"] == "BOOKMARK").count();
    assert!(bookmarks(&watch("True").await) > 0);
    assert_eq!(bookmarks(&watch("False").await), 0);
    server.shutdown().await;
}

/// Creates an object at `collection` and deletes it, returning the delete's code and body.
async fn create_and_delete(
    addr: std::net::SocketAddr,
    collection: &str,
    obj: &Value,
) -> (u16, Value) {
    let created = send(addr, "POST", collection, Some(obj)).await;
    assert_eq!(created.code, 201, "{}", created.body);
    let name = obj["metadata"]["name"].as_str().unwrap();
    let deleted = send(addr, "DELETE", &format!("{collection}/{name}"), None).await;
    (deleted.code, deleted.json())
}

#[tokio::test]
async fn completed_deletes_answer_the_object_where_the_upstream_registry_returns_it() {
    let (server, _client) = start_with(ServerConfig::default()).await;
    let addr = server.addr();
    let r = "/apis/resource.k8s.io/v1alpha2";
    let claim = json!({"metadata": {"name": "c"}, "spec": {"resourceClassName": "gpu"}});
    let template =
        json!({"metadata": {"name": "t"}, "spec": {"spec": {"resourceClassName": "gpu"}}});
    let class = json!({"metadata": {"name": "gpu"}, "driverName": "gpu.example.com"});
    let context = json!({"metadata": {"name": "p"}, "spec": {"potentialNodes": ["n1"]}});
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let returned = [
        (
            format!("{r}/namespaces/default/resourceclaims"),
            claim,
            "ResourceClaim",
        ),
        (
            format!("{r}/namespaces/default/resourceclaimtemplates"),
            template,
            "ResourceClaimTemplate",
        ),
        (format!("{r}/resourceclasses"), class, "ResourceClass"),
        (
            format!("{r}/namespaces/default/podschedulingcontexts"),
            context,
            "PodSchedulingContext",
        ),
        ("/api/v1/namespaces/default/pods".to_string(), pod, "Pod"),
    ];
    for (collection, obj, kind) in returned {
        let (code, body) = create_and_delete(addr, &collection, &obj).await;
        assert_eq!((code, body["kind"].as_str()), (200, Some(kind)), "{body}");
    }
    let lease = json!({"metadata": {"name": "l"}, "spec": {}});
    let statuses = [
        (CMS.to_string(), config_map("cm"), "configmaps", None),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases".to_string(),
            lease,
            "leases",
            Some("coordination.k8s.io"),
        ),
    ];
    for (collection, obj, plural, group) in statuses {
        let (code, body) = create_and_delete(addr, &collection, &obj).await;
        assert_eq!(code, 200);
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["status"], "Success");
        assert_eq!(body["details"]["kind"], plural);
        assert_eq!(body["details"]["name"], obj["metadata"]["name"]);
        assert_eq!(body["details"]["group"].as_str(), group, "{body}");
        assert!(body["details"]["uid"].is_string(), "{body}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_delete_that_only_marks_the_object_answers_it_and_202_when_orphan_dependents_is_false() {
    let (server, _client) = start_with(ServerConfig::default()).await;
    let addr = server.addr();
    for name in ["held", "held-202"] {
        let mut cm = config_map(name);
        cm["metadata"]["finalizers"] = json!(["example.com/hold"]);
        assert_eq!(send(addr, "POST", CMS, Some(&cm)).await.code, 201);
    }
    let marked = send(addr, "DELETE", &format!("{CMS}/held"), None).await;
    assert_eq!(marked.code, 200);
    assert_eq!(marked.json()["kind"], "ConfigMap");
    assert!(marked.json()["metadata"]["deletionTimestamp"].is_string());
    let accepted = send(
        addr,
        "DELETE",
        &format!("{CMS}/held-202?orphanDependents=false"),
        None,
    )
    .await;
    assert_eq!(accepted.code, 202, "{}", accepted.body);
    assert_eq!(
        accepted.json()["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_legacy_bindings_collection_binds_the_pod_the_binding_names() {
    let (server, _client) = start_with(ServerConfig::default()).await;
    let addr = server.addr();
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    assert_eq!(send(addr, "POST", pods, Some(&pod)).await.code, 201);
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    });
    let bindings = "/api/v1/namespaces/default/bindings";
    let bound = send(addr, "POST", bindings, Some(&binding)).await;
    assert_eq!(bound.code, 201, "{}", bound.body);
    assert_eq!(bound.json()["status"], "Success");
    let live = send(addr, "GET", &format!("{pods}/p"), None).await.json();
    assert_eq!(live["spec"]["nodeName"], "n1");
    let again = send(addr, "POST", bindings, Some(&binding)).await;
    assert_eq!(again.code, 409);
    let message = again.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("Operation cannot be fulfilled on pods/binding \"p\""),
        "{message}"
    );
    let other = send(
        addr,
        "POST",
        &format!("{pods}/other/binding"),
        Some(&binding),
    )
    .await;
    assert_eq!(
        other.code, 400,
        "the URL and the Binding name a different pod"
    );
    assert_eq!(send(addr, "GET", bindings, None).await.code, 405);
    let discovery = send(addr, "GET", "/api/v1", None).await.json();
    let entry = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "bindings")
        .cloned()
        .expect("bindings is discovered");
    assert_eq!(entry["verbs"], json!(["create"]));
    assert_eq!(entry["namespaced"], true);
    server.shutdown().await;
}

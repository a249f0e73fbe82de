//! The request options of every verb as a 1.30 API server takes them: `dryRun`, `fieldManager`,
//! `DeleteOptions` in the body or the query, `gracePeriodSeconds`, `limit`, `resourceVersionMatch`,
//! `timeoutSeconds` and `pretty`. Plain HTTP, so that codes and bodies are seen as sent.

use std::time::{Duration, Instant};

use crate::api_support::start_with;
use crate::raw_http::{send, send_with};
use dra_sim::server::ServerConfig;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn server() -> dra_sim::server::SimServerHandle {
    start_with(ServerConfig::default()).await.0
}

#[tokio::test]
async fn dry_run_answers_as_if_applied_and_stores_nothing() {
    let server = server().await;
    let addr = server.addr();
    let created = send(
        addr,
        "POST",
        &format!("{CMS}?dryRun=All"),
        Some(&config_map("dry")),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert!(created.json()["metadata"]["uid"].is_string());
    assert_eq!(
        send(addr, "GET", &format!("{CMS}/dry"), None).await.code,
        404
    );

    assert_eq!(
        send(addr, "POST", CMS, Some(&config_map("real")))
            .await
            .code,
        201
    );
    let again = send(
        addr,
        "POST",
        &format!("{CMS}?dryRun=All"),
        Some(&config_map("real")),
    )
    .await;
    assert_eq!(
        again.code, 409,
        "a dry-run create still sees the existing name"
    );
    let patch = json!({"data": {"k": "changed"}});
    let patched = send_with(
        addr,
        "PATCH",
        &format!("{CMS}/real?dryRun=All"),
        Some(&patch),
        &[("Content-Type", "application/merge-patch+json")],
    )
    .await;
    assert_eq!(patched.json()["data"]["k"], "changed");
    let deleted = send(addr, "DELETE", &format!("{CMS}/real?dryRun=All"), None).await;
    assert_eq!(deleted.json()["status"], "Success", "{}", deleted.body);
    let live = send(addr, "GET", &format!("{CMS}/real"), None).await.json();
    assert_eq!(
        live["data"]["k"], "v",
        "neither the patch nor the delete was stored"
    );

    let bogus = send(
        addr,
        "POST",
        &format!("{CMS}?dryRun=Yes"),
        Some(&config_map("x")),
    )
    .await;
    assert_eq!(bogus.code, 422);
    let message = bogus.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value"),
        "{message}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn field_manager_and_field_validation_are_checked_like_upstream() {
    let server = server().await;
    let addr = server.addr();
    let ok = send(
        addr,
        "POST",
        &format!("{CMS}?fieldManager=my-tool"),
        Some(&config_map("a")),
    )
    .await;
    assert_eq!(ok.code, 201);
    let long = "m".repeat(129);
    let too_long = send(
        addr,
        "POST",
        &format!("{CMS}?fieldManager={long}"),
        Some(&config_map("b")),
    )
    .await;
    assert_eq!(too_long.code, 422);
    assert_eq!(
        too_long.json()["details"]["causes"][0]["reason"],
        "FieldValueTooLong"
    );
    let validation = send(
        addr,
        "PUT",
        &format!("{CMS}/a?fieldValidation=Loose"),
        Some(&config_map("a")),
    )
    .await;
    assert_eq!(validation.code, 422);
    assert!(
        validation.body.contains("UpdateOptions.meta.k8s.io"),
        "{}",
        validation.body
    );
    server.shutdown().await;
}

#[tokio::test]
async fn delete_options_in_a_body_take_the_place_of_the_query_ones() {
    let server = server().await;
    let addr = server.addr();
    let mut held = config_map("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    assert_eq!(send(addr, "POST", CMS, Some(&held)).await.code, 201);
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"});
    let marked = send(
        addr,
        "DELETE",
        &format!("{CMS}/held?propagationPolicy=Foreground"),
        Some(&body),
    )
    .await;
    assert_eq!(marked.code, 200, "{}", marked.body);
    assert_eq!(
        marked.json()["metadata"]["finalizers"],
        json!(["example.com/hold", "orphan"])
    );
    let background = json!({"propagationPolicy": "Background"});
    let cleared = send(addr, "DELETE", &format!("{CMS}/held"), Some(&background)).await;
    assert_eq!(
        cleared.json()["metadata"]["finalizers"],
        json!(["example.com/hold"]),
        "an explicit Background policy drops the garbage collector's finalizers"
    );

    let invalid = send(
        addr,
        "DELETE",
        &format!("{CMS}/held?propagationPolicy=Later"),
        None,
    )
    .await;
    assert_eq!(invalid.code, 422);
    assert!(
        invalid.body.contains("DeleteOptions.meta.k8s.io"),
        "{}",
        invalid.body
    );
    let both = json!({"orphanDependents": true, "propagationPolicy": "Orphan"});
    assert_eq!(
        send(addr, "DELETE", &format!("{CMS}/held"), Some(&both))
            .await
            .code,
        422
    );
    server.shutdown().await;
}

#[tokio::test]
async fn grace_period_in_the_body_governs_a_bound_pod() {
    let server = server().await;
    let addr = server.addr();
    let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}});
    assert_eq!(send(addr, "POST", PODS, Some(&pod)).await.code, 201);
    let graceful = send(
        addr,
        "DELETE",
        &format!("{PODS}/p"),
        Some(&json!({"gracePeriodSeconds": 5})),
    )
    .await;
    assert_eq!(
        graceful.json()["metadata"]["deletionGracePeriodSeconds"],
        5,
        "{}",
        graceful.body
    );
    let now = send(
        addr,
        "DELETE",
        &format!("{PODS}/p"),
        Some(&json!({"gracePeriodSeconds": 0})),
    )
    .await;
    assert_eq!(now.code, 200);
    assert_eq!(now.json()["kind"], "Pod", "pods answer the deleted object");
    assert_eq!(
        send(addr, "GET", &format!("{PODS}/p"), None).await.code,
        404
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_1_30_list_from_version_0_comes_whole_from_the_watch_cache() {
    for version in dra_sim::KubernetesVersion::ALL {
        let server = start_with(ServerConfig {
            kubernetes_version: version,
            ..ServerConfig::default()
        })
        .await
        .0;
        let addr = server.addr();
        for name in ["a", "b", "c"] {
            send(addr, "POST", CMS, Some(&config_map(name))).await;
        }
        let list = |query: &'static str| async move {
            send(addr, "GET", &format!("{CMS}?{query}"), None)
                .await
                .json()
        };
        let from_zero = list("limit=2&resourceVersion=0").await;
        let whole = version == dra_sim::KubernetesVersion::V1_30;
        let expected: &[&str] = if whole { &["a", "b", "c"] } else { &["a", "b"] };
        assert_eq!(names(&from_zero), expected, "{version:?}");
        assert_eq!(from_zero["metadata"]["continue"].is_null(), whole);
        // Without version 0 the list is paged (from etcd, upstream).
        let page = list("limit=2").await;
        assert_eq!(names(&page), ["a", "b"], "{version:?}");
        assert!(page["metadata"]["continue"].is_string());
        server.shutdown().await;
    }
}

#[tokio::test]
async fn limit_zero_or_negative_means_no_limit_and_garbage_is_a_bad_request() {
    let server = server().await;
    let addr = server.addr();
    for name in ["a", "b", "c"] {
        send(addr, "POST", CMS, Some(&config_map(name))).await;
    }
    for limit in ["0", "-1"] {
        let list = send(addr, "GET", &format!("{CMS}?limit={limit}"), None)
            .await
            .json();
        assert_eq!(names(&list), ["a", "b", "c"]);
        assert!(list["metadata"]["continue"].is_null());
    }
    assert_eq!(
        send(addr, "GET", &format!("{CMS}?limit=ten"), None)
            .await
            .code,
        400
    );
    let counted = send(addr, "GET", &format!("{CMS}?limit=1"), None)
        .await
        .json();
    assert_eq!(counted["metadata"]["remainingItemCount"], 2);
    // A later page's count follows from the first page's snapshot, also after a new object.
    send(addr, "POST", CMS, Some(&config_map("d"))).await;
    let next_page = |page: &serde_json::Value| {
        let token = page["metadata"]["continue"].as_str().unwrap().to_owned();
        async move {
            send(
                addr,
                "GET",
                &format!("{CMS}?limit=1&continue={token}"),
                None,
            )
            .await
            .json()
        }
    };
    let second = next_page(&counted).await;
    assert_eq!(names(&second), ["b"]);
    assert_eq!(second["metadata"]["remainingItemCount"], 1);
    let last = next_page(&second).await;
    assert_eq!(names(&last), ["c"]);
    assert!(last["metadata"]["continue"].is_null());
    assert!(last["metadata"]["remainingItemCount"].is_null());
    let selected = send(
        addr,
        "GET",
        &format!("{CMS}?limit=1&fieldSelector=metadata.name!=x"),
        None,
    )
    .await
    .json();
    assert!(
        selected["metadata"]["remainingItemCount"].is_null(),
        "no count under a selector: {selected}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn pages_after_the_first_are_read_at_the_first_pages_revision() {
    let server = server().await;
    let addr = server.addr();
    for name in ["a", "c", "e"] {
        send(addr, "POST", CMS, Some(&config_map(name))).await;
    }
    let first = send(addr, "GET", &format!("{CMS}?limit=1"), None)
        .await
        .json();
    assert_eq!(names(&first), ["a"]);
    send(addr, "POST", CMS, Some(&config_map("b"))).await;
    send(addr, "DELETE", &format!("{CMS}/e"), None).await;
    let token = first["metadata"]["continue"].as_str().unwrap();
    let rest = send(
        addr,
        "GET",
        &format!("{CMS}?limit=10&continue={token}"),
        None,
    )
    .await
    .json();
    assert_eq!(
        names(&rest),
        ["c", "e"],
        "the snapshot of the first page, not the present"
    );
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn resource_version_match_exact_reads_the_past_and_invalid_combinations_are_rejected() {
    let server = server().await;
    let addr = server.addr();
    send(addr, "POST", CMS, Some(&config_map("a"))).await;
    let then = send(addr, "GET", CMS, None).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    send(addr, "POST", CMS, Some(&config_map("b"))).await;
    let exact = send(
        addr,
        "GET",
        &format!("{CMS}?resourceVersion={then}&resourceVersionMatch=Exact"),
        None,
    )
    .await
    .json();
    assert_eq!(names(&exact), ["a"]);
    assert_eq!(exact["metadata"]["resourceVersion"], then.as_str());
    let not_older = send(
        addr,
        "GET",
        &format!("{CMS}?resourceVersion={then}&resourceVersionMatch=NotOlderThan"),
        None,
    )
    .await
    .json();
    assert_eq!(names(&not_older), ["a", "b"]);
    let future = send(
        addr,
        "GET",
        &format!("{CMS}?resourceVersion=999999&resourceVersionMatch=NotOlderThan"),
        None,
    )
    .await;
    assert_eq!(future.code, 504, "{}", future.body);
    assert!(future.body.contains("Too large resource version"));

    for bad in [
        "resourceVersionMatch=Exact",
        "resourceVersion=0&resourceVersionMatch=Exact",
        "resourceVersion=1&resourceVersionMatch=Latest",
        "watch=true&resourceVersionMatch=NotOlderThan",
    ] {
        let answer = send(addr, "GET", &format!("{CMS}?{bad}"), None).await;
        assert_eq!(answer.code, 422, "{bad}: {}", answer.body);
        assert!(answer.body.contains("ListOptions.meta.k8s.io"), "{bad}");
    }

    server.compact_history();
    let gone = send(
        addr,
        "GET",
        &format!("{CMS}?resourceVersion={then}&resourceVersionMatch=Exact"),
        None,
    )
    .await;
    assert_eq!(gone.code, 410);
    assert_eq!(
        gone.json()["message"],
        "The resourceVersion for the provided list is too old."
    );
    server.shutdown().await;
}

#[tokio::test]
async fn timeout_seconds_zero_means_the_default_watch_length() {
    let config = ServerConfig {
        default_watch_timeout: Duration::from_millis(1500),
        ..ServerConfig::default()
    };
    let (server, _client) = start_with(config).await;
    let started = Instant::now();
    send(
        server.addr(),
        "GET",
        &format!("{CMS}?watch=1&timeoutSeconds=0"),
        None,
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn pretty_indents_the_answer_when_parse_bool_says_true() {
    let server = server().await;
    let addr = server.addr();
    let pretty = send(addr, "GET", "/api/v1/namespaces/default?pretty=True", None).await;
    assert!(
        pretty.body.contains("\n  \"kind\": \"Namespace\""),
        "{}",
        pretty.body
    );
    for compact in ["pretty=yes", "pretty=0", "other=1"] {
        let answer = send(
            addr,
            "GET",
            &format!("/api/v1/namespaces/default?{compact}"),
            None,
        )
        .await;
        assert!(!answer.body.contains('\n'), "{compact}: {}", answer.body);
    }
    let error = send(addr, "GET", &format!("{CMS}/absent?pretty=1"), None).await;
    assert_eq!(error.code, 404);
    assert!(error.body.contains("\n  \"code\": 404"), "{}", error.body);
    server.shutdown().await;
}

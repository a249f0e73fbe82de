//! A standby answers `/v1` from the leader's ledger: it forwards to a leader served on a real
//! socket and passes its answer back (method, path, query, body and token kept, hop-by-hop
//! headers dropped), names both replicas in the headers, answers 503 naming the leader when it
//! cannot reach it, never forwards a forwarded request again, and keeps `/healthz`, `/readyz`
//! and `/metrics` its own. A `continue` token of another leadership term answers 410.

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::any;
use axum::{Json, Router};
use dra_api::{router, AppState, Leadership, Serving};

use crate::support::{fixture, send, with_token, Fixture, TOKEN};

/// A [`Leadership`] the test sets.
struct Scripted(Mutex<Serving>);

impl Scripted {
    fn new(serving: Serving) -> Arc<Self> {
        Arc::new(Scripted(Mutex::new(serving)))
    }

    fn set(&self, serving: Serving) {
        *self.0.lock().unwrap() = serving;
    }
}

impl Leadership for Scripted {
    fn serving(&self) -> Serving {
        self.0.lock().unwrap().clone()
    }
}

/// Serves `app` on a free loopback port; its base URL.
async fn serve(app: Router) -> Uri {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}").parse().unwrap()
}

/// A port nothing listens on.
async fn closed_port() -> Uri {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}").parse().unwrap()
}

/// The leader `leader-0` (term 3) over the fixture's ledger with the token, served: the
/// fixture, its state and its URL.
async fn leader() -> (Fixture, AppState, Uri) {
    let f = fixture();
    let state = with_token(f.state.clone())
        .with_replica("leader-0")
        .with_leadership(Scripted::new(Serving::Local { term: 3 }));
    let url = serve(router(state.clone())).await;
    (f, state, url)
}

/// A standby `standby-1` over a ledger of its own, with leadership `serving`.
fn standby_of(serving: Serving) -> (Fixture, AppState) {
    let f = fixture();
    let state = with_token(f.state.clone())
        .with_replica("standby-1")
        .with_leadership(Scripted::new(serving));
    (f, state)
}

fn led_by(url: &Uri) -> Serving {
    Serving::Leader {
        identity: "leader-0".to_owned(),
        url: Ok(url.clone()),
    }
}

async fn get(state: &AppState, path: &str) -> crate::support::Answer {
    send(router(state.clone()), Method::GET, path, None, None).await
}

#[tokio::test]
async fn a_standby_answers_reads_from_the_leader_and_names_both_replicas() {
    let (leader_fixture, leader_state, url) = leader().await;
    let (_standby_fixture, standby) = standby_of(led_by(&url));
    // Only the leader's ledger has c5: an answer with it came from the leader.
    testkit::ledger::allocate_on(&leader_fixture.ledger, "c5", "team-c", "node-b", 1);

    let path = "/v1/claims?namespace=team-c&limit=10";
    let direct = get(&leader_state, path).await;
    let through = get(&standby, path).await;
    assert_eq!(through.status, StatusCode::OK);
    assert_eq!(through.json(), direct.json());
    assert_eq!(through.json()["items"][0]["uid"], "c5");
    assert_eq!(through.headers["dra-ledger-replica"], "leader-0");
    assert_eq!(through.headers["dra-ledger-forwarded-by"], "standby-1");
    assert_eq!(direct.headers["dra-ledger-replica"], "leader-0");
    assert!(direct.headers.get("dra-ledger-forwarded-by").is_none());

    // The leader's 4xx come back as they are, with its JSON error.
    let missing = get(&standby, "/v1/claims/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.code(), "not_found");
    assert_eq!(missing.headers["dra-ledger-replica"], "leader-0");
}

#[tokio::test]
async fn writes_reach_the_leader_with_their_token_and_body() {
    let (leader_fixture, _leader_state, url) = leader().await;
    let (standby_fixture, standby) = standby_of(led_by(&url));
    let path = "/v1/nodes/node-a/devices/gpu-3/cordon";
    let body = Some(br#"{"reason":"fan noise"}"#.to_vec());

    let refused = send(
        router(standby.clone()),
        Method::POST,
        path,
        None,
        body.clone(),
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::UNAUTHORIZED,
        "the leader checks the token"
    );
    assert_eq!(refused.headers["dra-ledger-replica"], "leader-0");

    let done = send(
        router(standby.clone()),
        Method::POST,
        path,
        Some(TOKEN),
        body,
    )
    .await;
    assert_eq!(
        done.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&done.body)
    );
    let cordoned = |ledger: &dra_allocator::ledger::Ledger| {
        ledger
            .node_devices("node-a")
            .unwrap()
            .unwrap()
            .into_iter()
            .any(|d| d.name == "gpu-3" && d.cordoned)
    };
    assert!(
        cordoned(&leader_fixture.ledger),
        "cordoned in the leader's ledger"
    );
    assert!(!cordoned(&standby_fixture.ledger), "not in the standby's");
}

#[tokio::test]
async fn health_readiness_metrics_and_the_page_stay_local() {
    let (_leader_fixture, _leader_state, url) = leader().await;
    let (_f, standby) = standby_of(led_by(&url));
    for path in ["/healthz", "/readyz", "/metrics", "/", "/ui/"] {
        let answer = get(&standby, path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        assert_eq!(answer.headers["dra-ledger-replica"], "standby-1", "{path}");
        assert!(
            answer.headers.get("dra-ledger-forwarded-by").is_none(),
            "{path}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_leader_answers_503_naming_it_never_the_standby_ledger() {
    let url = closed_port().await;
    let (_f, standby) = standby_of(led_by(&url));
    let answer = get(&standby, "/v1/nodes").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.code(), "leader_unreachable");
    let message = answer.message();
    assert!(
        message.contains("leader-0") && message.contains(&url.authority().unwrap().to_string()),
        "{message}"
    );
    assert_eq!(answer.headers["dra-ledger-replica"], "standby-1");

    let (_f, without_address) = standby_of(Serving::Leader {
        identity: "leader-0".to_owned(),
        url: Err(Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(
            "the identity cannot be part of a URL",
        ))),
    });
    let answer = get(&without_address, "/v1/nodes").await;
    assert_eq!(answer.code(), "leader_unreachable");
    assert!(String::from_utf8_lossy(&answer.body).contains("cannot be part of a URL"));

    for (serving, text) in [
        (Serving::NoLeader, "no replica holds the leader lease"),
        (Serving::Lost, "lost the leader lease"),
    ] {
        let (_f, state) = standby_of(serving);
        let answer = get(&state, "/v1/claims").await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.code(), "no_leader");
        assert!(String::from_utf8_lossy(&answer.body).contains(text));
    }
}

#[tokio::test]
async fn a_forwarded_request_is_never_forwarded_again() {
    // Two standbys that each think the other leads: the request goes one hop, then 503.
    let a_view = Scripted::new(Serving::NoLeader);
    let f_a = fixture();
    let a = with_token(f_a.state.clone())
        .with_replica("standby-a")
        .with_leadership(a_view.clone());
    let a_url = serve(router(a.clone())).await;
    let (_f_b, b) = standby_of(Serving::Leader {
        identity: "standby-a".to_owned(),
        url: Ok(a_url),
    });
    let b_url = serve(router(b.clone())).await;
    a_view.set(Serving::Leader {
        identity: "standby-1".to_owned(),
        url: Ok(b_url),
    });

    let answer = get(&a, "/v1/nodes").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.code(), "not_leader");
    let message = answer.message();
    assert!(
        message.contains("standby-1 is not the leader")
            && message.contains("the lease is held by standby-a")
            && message.contains("standby-a forwarded"),
        "{message}"
    );
    assert_eq!(answer.headers["dra-ledger-replica"], "standby-1");
    assert_eq!(answer.headers["dra-ledger-forwarded-by"], "standby-a");
}

/// Answers every request with its method, URI and headers as JSON.
async fn echo(method: Method, uri: Uri, headers: HeaderMap) -> Json<serde_json::Value> {
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").into()))
        .collect();
    Json(serde_json::json!({"method": method.as_str(), "uri": uri.to_string(), "headers": headers}))
}

#[tokio::test]
async fn the_forwarded_request_keeps_end_to_end_headers_only_and_is_marked() {
    let url = serve(Router::new().fallback(any(echo))).await;
    let (_f, standby) = standby_of(led_by(&url));
    let request = axum::http::Request::builder()
        .method(Method::POST)
        .uri("/v1/reconcile?dry=1")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("connection", "x-hop")
        .header("x-hop", "only for the first hop")
        .header("proxy-authorization", "Basic c2VjcmV0")
        .header("x-request-id", "r-42")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(router(standby), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let seen: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let headers = &seen["headers"];
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["uri"], "/v1/reconcile?dry=1");
    assert_eq!(headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(headers["x-request-id"], "r-42");
    assert_eq!(headers["dra-ledger-forwarded-by"], "standby-1");
    assert_eq!(headers["host"], url.authority().unwrap().as_str());
    for hop in ["x-hop", "proxy-authorization", "connection"] {
        assert!(headers.get(hop).is_none(), "{hop} was passed on: {headers}");
    }
}

#[tokio::test]
async fn a_continue_token_of_another_term_answers_410() {
    let f = fixture();
    let view = Scripted::new(Serving::Local { term: 3 });
    let state = f
        .state
        .clone()
        .with_replica("leader-0")
        .with_leadership(view.clone());
    let first = get(&state, "/v1/claims?limit=1").await;
    let token = first.json()["continue"].as_str().unwrap().to_owned();
    let next = format!("/v1/claims?limit=1&continue={token}");
    assert_eq!(get(&state, &next).await.status, StatusCode::OK);

    // The same replica, leading again after another held the lease: a new term.
    view.set(Serving::Local { term: 5 });
    let gone = get(&state, &next).await;
    assert_eq!(gone.status, StatusCode::GONE);
    assert_eq!(gone.code(), "expired");
    assert!(String::from_utf8_lossy(&gone.body).contains("list again without continue"));

    // Another replica's ledger, even in the same term.
    let other = f
        .state
        .clone()
        .with_replica("leader-1")
        .with_leadership(Scripted::new(Serving::Local { term: 3 }));
    assert_eq!(get(&other, &next).await.status, StatusCode::GONE);
}

//! Property tests of the admin API's parsing of outside input, through `oneshot`: arbitrary query
//! strings (`limit`, `continue`, `since`, `namespace`, `node` and unknown keys), path segments
//! (node, device and claim names as arbitrary percent-encoded bytes), cordon bodies of any bytes,
//! JSON shape or size, and `Authorization` headers. Every answer is a success or a 4xx with the
//! JSON error shape whose `code` matches the status; never a 5xx, never a panic.

use std::fmt::Write as _;

use crate::support::{
    answer_of, fixture, get, post_with_token, send, with_token, Answer, Fixture, TOKEN,
};
use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use dra_api::limits::BODY_LIMIT;
use dra_api::router;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tower::ServiceExt;

/// The `code` each 4xx status must carry.
fn expected_code(status: StatusCode) -> Option<&'static str> {
    Some(match status.as_u16() {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        410 => "expired",
        413 => "payload_too_large",
        _ => return None,
    })
}

/// Fails unless `answer` has one of `allowed` statuses, and, when it is an error, the JSON error
/// shape with the status's code and a message.
fn check_answer(answer: &Answer, allowed: &[StatusCode], what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        allowed.contains(&answer.status),
        "{what}: status {} not in {allowed:?}: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body)
    );
    if answer.status.is_success() {
        return Ok(());
    }
    prop_assert_eq!(
        answer.headers.get(header::CONTENT_TYPE),
        Some(&HeaderValue::from_static("application/json")),
        "{}",
        what
    );
    let body: serde_json::Value = serde_json::from_slice(&answer.body)
        .map_err(|e| TestCaseError::fail(format!("{what}: error body is not JSON: {e}")))?;
    let code = expected_code(answer.status)
        .ok_or_else(|| TestCaseError::fail(format!("{what}: status {}", answer.status)))?;
    prop_assert_eq!(&body["error"]["code"], code, "{}", what);
    let message = body["error"]["message"].as_str().unwrap_or_default();
    prop_assert!(!message.is_empty(), "{what}: empty message in {body}");
    prop_assert_eq!(body.as_object().map(serde_json::Map::len), Some(1));
    Ok(())
}

/// Percent-encodes every byte outside the unreserved set, so any bytes make a valid URI.
fn encode(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        if b.is_ascii_alphanumeric() || b"-._~".contains(b) {
            out.push(char::from(*b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
        out
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// A query value: numbers at and around the limits, valid and broken continue tokens, or
/// arbitrary bytes.
fn query_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24),
        (-2i128..=1002).prop_map(|n| n.to_string().into_bytes()),
        prop::sample::select(vec![
            "0",
            "1000",
            "1001",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "1e3",
            " 5",
            "0x10",
            "",
            "7b7d",
            "7b2276223a312c226166746572223a226331222c226e616d657370616365223a6e756c6c2c226e6f6465223a6e756c6c7d",
            "zz",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        "[0-9a-f]{0,64}".prop_map(String::into_bytes),
    ]
}

/// A query string of keys the listings know (and some they do not), each with a value.
fn query_string() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        prop::sample::select(vec![
            "limit",
            "continue",
            "since",
            "namespace",
            "node",
            "unknown",
            "limit[]",
            ""
        ])
        .prop_map(|k| k.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..6),
    ];
    prop::collection::vec((key, query_value(), any::<bool>()), 0..5).prop_map(|pairs| {
        pairs
            .iter()
            .map(|(k, v, with_equals)| {
                if *with_equals || !v.is_empty() {
                    format!("{}={}", encode(k), encode(v))
                } else {
                    encode(k)
                }
            })
            .collect::<Vec<_>>()
            .join("&")
    })
}

/// Raw query text of characters a URI allows, not percent-encoded: stray `%`, `+`, `;` and `=`.
fn raw_query() -> impl Strategy<Value = String> {
    "[a-z0-9=&%+;,._~!$'()*:@/?-]{0,40}"
}

#[test]
fn arbitrary_query_strings_on_the_listings_are_200_or_json_400_or_410_for_an_old_continue() {
    let Fixture { state, .. } = fixture();
    let rt = runtime();
    let strategy = (
        prop::sample::select(vec!["/v1/claims", "/v1/audit", "/v1/nodes", "/v1/intents"]),
        prop_oneof![query_string(), raw_query()],
    );
    runner(400)
        .run(&strategy, |(path, query)| {
            let uri = format!("{path}?{query}");
            prop_assume!(uri.parse::<axum::http::Uri>().is_ok());
            let answer = rt.block_on(get(&state, &uri));
            // A well-formed token of an older version (one of the samples) is expired: 410.
            let allowed: &[StatusCode] = if query.contains("continue") {
                &[StatusCode::OK, StatusCode::BAD_REQUEST, StatusCode::GONE]
            } else {
                &[StatusCode::OK, StatusCode::BAD_REQUEST]
            };
            check_answer(&answer, allowed, &uri)?;
            if answer.status == StatusCode::OK {
                let body: serde_json::Value = serde_json::from_slice(&answer.body)
                    .map_err(|e| TestCaseError::fail(format!("{uri}: {e}")))?;
                prop_assert!(body["items"].is_array(), "{uri}: {body}");
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn limits_and_since_outside_their_documented_range_are_400_naming_the_parameter() {
    let Fixture { state, .. } = fixture();
    let rt = runtime();
    let strategy = prop_oneof![
        (1001u64..).prop_map(|n| format!("limit={n}")),
        Just("limit=0".to_owned()),
        (9_223_372_036_854_775_808_u64..).prop_map(|n| format!("since={n}")),
    ];
    runner(64)
        .run(&strategy, |query| {
            for path in ["/v1/claims", "/v1/audit"] {
                if path == "/v1/claims" && query.starts_with("since") {
                    continue;
                }
                let uri = format!("{path}?{query}");
                let answer = rt.block_on(get(&state, &uri));
                check_answer(&answer, &[StatusCode::BAD_REQUEST], &uri)?;
                let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
                let name = query.split('=').next().unwrap();
                prop_assert!(
                    body["error"]["message"].as_str().unwrap().contains(name),
                    "{uri}: {body}"
                );
            }
            Ok(())
        })
        .unwrap();
}

/// A path segment: a name of the fixture, or arbitrary bytes (percent-encoded; may be invalid
/// UTF-8, contain `/`, or be empty).
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["node-a", "node-b", "gpu-0", "gpu-3", "c1", "c4"])
            .prop_map(str::to_owned),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| encode(&b)),
    ]
}

#[test]
fn arbitrary_path_segments_are_answered_200_400_or_404_as_json() {
    let Fixture { state, .. } = fixture();
    let state = with_token(state);
    let rt = runtime();
    let strategy = (segment(), segment(), 0..4usize);
    runner(400)
        .run(&strategy, |(first, second, route)| {
            let (method, uri) = match route {
                0 => (Method::GET, format!("/v1/nodes/{first}/devices")),
                1 => (Method::GET, format!("/v1/claims/{first}")),
                2 => (
                    Method::POST,
                    format!("/v1/nodes/{first}/devices/{second}/cordon"),
                ),
                _ => (
                    Method::POST,
                    format!("/v1/nodes/{first}/devices/{second}/uncordon"),
                ),
            };
            let answer = rt.block_on(send(router(state.clone()), method, &uri, Some(TOKEN), None));
            check_answer(
                &answer,
                &[
                    StatusCode::OK,
                    StatusCode::BAD_REQUEST,
                    StatusCode::NOT_FOUND,
                ],
                &uri,
            )
        })
        .unwrap();
}

/// A JSON value of any shape, a few levels deep.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop_oneof![Just("reason".to_owned()), "[a-z]{0,8}"],
                inner,
                0..3
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Whether a cordon body is one the endpoint accepts: nothing, `null`, or an object whose only
/// key is `reason` with a string or `null`.
fn acceptable_cordon_body(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::Object(map) => map
            .iter()
            .all(|(key, value)| key == "reason" && (value.is_string() || value.is_null())),
        _ => false,
    }
}

#[test]
fn cordon_bodies_of_any_json_shape_are_accepted_exactly_when_well_formed() {
    let Fixture { state, .. } = fixture();
    let state = with_token(state);
    let rt = runtime();
    runner(300)
        .run(&json_value(), |value| {
            let body = serde_json::to_vec(&value).unwrap();
            let answer = rt.block_on(post_with_token(
                &state,
                "/v1/nodes/node-a/devices/gpu-3/cordon",
                body,
            ));
            let expected = if acceptable_cordon_body(&value) {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            };
            check_answer(&answer, &[expected], &value.to_string())
        })
        .unwrap();
}

#[test]
fn cordon_bodies_of_arbitrary_bytes_are_200_or_json_400() {
    let Fixture { state, .. } = fixture();
    let state = with_token(state);
    let rt = runtime();
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        "[ \t\r\n{}\\[\\]\":,a-z0-9]{0,64}".prop_map(String::into_bytes),
    ];
    runner(300)
        .run(&strategy, |body| {
            let answer = rt.block_on(post_with_token(
                &state,
                "/v1/nodes/node-a/devices/gpu-2/uncordon",
                body.clone(),
            ));
            check_answer(
                &answer,
                &[StatusCode::OK, StatusCode::BAD_REQUEST],
                &String::from_utf8_lossy(&body),
            )
        })
        .unwrap();
}

/// Sends `body` to the cordon endpoint as a stream of `chunk`-byte pieces without a length, so
/// the limit must be enforced while reading.
fn streamed_cordon(body: &[u8], chunk: usize) -> Request<Body> {
    let pieces: Vec<Result<bytes::Bytes, std::io::Error>> = body
        .chunks(chunk.max(1))
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    Request::post("/v1/nodes/node-a/devices/gpu-1/cordon")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(futures::stream::iter(pieces)))
        .unwrap()
}

#[test]
fn bodies_over_the_limit_are_413_with_or_without_a_length_and_under_it_are_read() {
    let Fixture { state, .. } = fixture();
    let state = with_token(state);
    let rt = runtime();
    // The size of a `{"reason": "xxx…"}` body, from well under to several times over the limit.
    let strategy = (0..BODY_LIMIT * 4, 1..70_000usize, any::<bool>());
    runner(48)
        .run(&strategy, |(size, chunk, streamed)| {
            let filler = size.saturating_sub(14);
            let body = format!("{{\"reason\": \"{}\"}}", "x".repeat(filler)).into_bytes();
            let length = body.len();
            let answer = if streamed {
                let request = streamed_cordon(&body, chunk);
                rt.block_on(async {
                    answer_of(router(state.clone()).oneshot(request).await.unwrap()).await
                })
            } else {
                rt.block_on(post_with_token(
                    &state,
                    "/v1/nodes/node-a/devices/gpu-1/cordon",
                    body,
                ))
            };
            let expected = if length > BODY_LIMIT {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::OK
            };
            check_answer(&answer, &[expected], &format!("{length} bytes"))
        })
        .unwrap();
}

#[test]
fn arbitrary_authorization_headers_are_401_unless_exactly_the_bearer_token() {
    let Fixture { state, .. } = fixture();
    let state = with_token(state);
    let rt = runtime();
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        ".{0,8}".prop_map(|s| format!("Bearer {TOKEN}{s}").into_bytes()),
        ".{0,8}".prop_map(|s| format!("{s}Bearer {TOKEN}").into_bytes()),
        (0..TOKEN.len()).prop_map(|n| format!("Bearer {}", &TOKEN[..n]).into_bytes()),
    ];
    runner(300)
        .run(&strategy, |value| {
            let Ok(header_value) = HeaderValue::from_bytes(&value) else {
                return Ok(());
            };
            let request = Request::post("/v1/nodes/node-a/devices/gpu-0/cordon")
                .header(header::AUTHORIZATION, header_value)
                .body(Body::empty())
                .unwrap();
            let response = rt.block_on(router(state.clone()).oneshot(request)).unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            let body = rt
                .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                .unwrap()
                .to_vec();
            let answer = Answer {
                status,
                headers,
                body,
            };
            let exact = value == format!("Bearer {TOKEN}").as_bytes();
            let expected = if exact {
                StatusCode::OK
            } else {
                StatusCode::UNAUTHORIZED
            };
            let what = String::from_utf8_lossy(&value).into_owned();
            check_answer(&answer, &[expected], &what)?;
            prop_assert!(!String::from_utf8_lossy(&answer.body).contains(TOKEN));
            Ok(())
        })
        .unwrap();
}

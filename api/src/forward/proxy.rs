//! The HTTP/1 client a standby forwards `/v1` requests to the leader with: method, path, query,
//! body and end-to-end headers (the `Authorization` of the admin token among them) go as they
//! came, hop-by-hop headers (`Connection` and those it names, `Keep-Alive`, `TE`, `Trailer`,
//! `Transfer-Encoding`, `Upgrade`, the proxy headers) and `Host` do not; the request carries
//! [`FORWARDED_BY`] so that the receiving replica never forwards it again. The answer streams
//! back as it comes (the backup can be large), without its hop-by-hop headers.
//!
//! Time limits: [`CONNECT_TIMEOUT`] to connect, and the caller's limit until the answer's head.
//! Knows nothing of leadership; [`super`] decides whether and where to forward.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Uri, Version};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{Full, LengthLimitError};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::serving::FORWARDED_BY;
use crate::error_response::ErrorResponse;
use crate::limits::BODY_LIMIT;

/// Time limit of connecting to the leader.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an idle connection to the leader is kept for the next request.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request was not forwarded.
#[derive(Debug)]
pub(crate) enum ForwardError {
    /// The request itself is refused (a body over the limit, one that breaks off).
    Request(ErrorResponse),
    /// The leader did not answer; why, for people.
    Unreachable(String),
}

/// Why a request's address at the leader could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    /// The original path and query do not make a path under the leader's URL.
    #[error("invalid forwarded path: {0}")]
    Path(#[source] http::uri::InvalidUri),
    /// The leader's URL with that path is no URL.
    #[error("invalid leader URL {base}: {source}")]
    LeaderUrl {
        /// The leader's URL.
        base: Uri,
        /// Why.
        source: http::uri::InvalidUriParts,
    },
}

/// The client, with a pool of connections to the leader. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Forwarder {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        Forwarder {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(IDLE_TIMEOUT)
                .build(connector),
        }
    }
}

/// The headers of one hop only, which a proxy must not pass on.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes the hop-by-hop headers, including those that `Connection` names.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// `base` (`http://host:port`, maybe with a path prefix) with the path and query of `original`.
pub(crate) fn target(base: &Uri, original: &Uri) -> Result<Uri, TargetError> {
    let path_and_query = original.path_and_query().map_or("/", |pq| pq.as_str());
    let prefix = base.path().trim_end_matches('/');
    let mut parts = base.clone().into_parts();
    parts.path_and_query = Some(
        format!("{prefix}{path_and_query}")
            .parse()
            .map_err(TargetError::Path)?,
    );
    Uri::from_parts(parts).map_err(|source| TargetError::LeaderUrl {
        base: base.clone(),
        source,
    })
}

/// The innermost cause of `error`: the connector's (connection refused, no such host).
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    cause
}

impl Forwarder {
    /// Sends `request` to the admin server at `base` as forwarded by replica `via`, and returns
    /// the leader's answer once its head arrived within `limit`.
    pub(crate) async fn forward(
        &self,
        request: Request,
        base: &Uri,
        via: &HeaderValue,
        limit: Duration,
    ) -> Result<Response, ForwardError> {
        let (mut parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, BODY_LIMIT)
            .await
            .map_err(|error| {
                let too_large = error
                    .into_inner()
                    .downcast_ref::<LengthLimitError>()
                    .is_some();
                ForwardError::Request(if too_large {
                    ErrorResponse::PayloadTooLarge { limit: BODY_LIMIT }
                } else {
                    ErrorResponse::BadRequest("the request body could not be read".to_owned())
                })
            })?;
        parts.uri = target(base, &parts.uri)
            .map_err(|error| ForwardError::Unreachable(error.to_string()))?;
        parts.version = Version::HTTP_11;
        strip_hop_by_hop(&mut parts.headers);
        parts.headers.remove(header::HOST);
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(FORWARDED_BY, via.clone());
        let outgoing = http::Request::from_parts(parts, Full::new(body));
        let answer = tokio::time::timeout(limit, self.client.request(outgoing))
            .await
            .map_err(|_| {
                ForwardError::Unreachable(format!("no answer within {} s", limit.as_secs()))
            })?
            .map_err(|error| ForwardError::Unreachable(cause(&error)))?;
        let mut response = answer.map(Body::new);
        strip_hop_by_hop(response.headers_mut());
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_removed() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-hop"),
            ("keep-alive", "timeout=5"),
            ("x-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("authorization", "Bearer t"),
            ("content-type", "application/json"),
        ] {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        strip_hop_by_hop(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["authorization", "content-type"]);
    }

    #[test]
    fn target_keeps_path_and_query_under_the_base() {
        let original: Uri = "/v1/claims?limit=1&continue=7b".parse().unwrap();
        let cases = [
            (
                "http://leader:8080",
                "http://leader:8080/v1/claims?limit=1&continue=7b",
            ),
            (
                "http://leader:8080/",
                "http://leader:8080/v1/claims?limit=1&continue=7b",
            ),
            (
                "http://10.0.0.7:8080/admin/",
                "http://10.0.0.7:8080/admin/v1/claims?limit=1&continue=7b",
            ),
        ];
        for (base, expected) in cases {
            let base: Uri = base.parse().unwrap();
            assert_eq!(target(&base, &original).unwrap().to_string(), expected);
        }
    }
}

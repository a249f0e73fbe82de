//! A tower layer for the Kubernetes client that reports every request to the API server, with
//! its verb, status and duration, to an [`ApiCallSink`]: the metrics count them in
//! `api_requests_total{verb,code}` ([`ApiRequestsLayer`]); a benchmark may time them. Works on
//! plain `http` requests and responses, so it stacks on a `kube::Client`'s service
//! (`ClientBuilder::with_layer`) without this crate depending on kube.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Method, Request, Response, StatusCode};
use tower::{Layer, Service};

use crate::metrics::Metrics;

/// The verb of a Kubernetes API request: `watch` for a GET with `watch=true` (or `1`), otherwise
/// from the method (`get`, `create`, `update`, `patch`, `delete`, `other`).
pub fn verb_of<B>(request: &Request<B>) -> &'static str {
    match *request.method() {
        Method::GET => {
            let watching = request.uri().query().is_some_and(|query| {
                query
                    .split('&')
                    .any(|pair| pair == "watch=true" || pair == "watch=1")
            });
            if watching {
                "watch"
            } else {
                "get"
            }
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

/// One request of the Kubernetes client to the API server, as the layer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCall {
    /// The request's verb ([`verb_of`]).
    pub verb: &'static str,
    /// The response's status; `None` when the request failed without one.
    pub status: Option<StatusCode>,
    /// From the call until the response's head arrived, or the failure.
    pub took: Duration,
}

/// Where an [`ApiCallLayer`] reports each request.
pub trait ApiCallSink: Send + Sync + 'static {
    /// Takes note of one finished request.
    fn api_call(&self, call: ApiCall);
}

/// `api_requests_total{verb,code}`: the status code, or `error` without a response.
impl ApiCallSink for Metrics {
    fn api_call(&self, call: ApiCall) {
        match call.status {
            Some(status) => self.record_api_request(call.verb, status.as_str()),
            None => self.record_api_request(call.verb, "error"),
        }
    }
}

/// Reports every request of the wrapped service to a sink.
#[derive(Debug)]
pub struct ApiCallLayer<K> {
    sink: Arc<K>,
}

impl<K> Clone for ApiCallLayer<K> {
    fn clone(&self) -> Self {
        ApiCallLayer {
            sink: self.sink.clone(),
        }
    }
}

impl<K> ApiCallLayer<K> {
    /// A layer reporting to `sink`.
    pub fn new(sink: Arc<K>) -> Self {
        ApiCallLayer { sink }
    }
}

/// Counts requests of the wrapped service in [`Metrics`].
pub type ApiRequestsLayer = ApiCallLayer<Metrics>;

impl<S, K> Layer<S> for ApiCallLayer<K> {
    type Service = ApiCalls<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiCalls {
            inner,
            sink: self.sink.clone(),
        }
    }
}

/// The service made by [`ApiCallLayer`].
#[derive(Debug)]
pub struct ApiCalls<S, K> {
    inner: S,
    sink: Arc<K>,
}

impl<S: Clone, K> Clone for ApiCalls<S, K> {
    fn clone(&self) -> Self {
        ApiCalls {
            inner: self.inner.clone(),
            sink: self.sink.clone(),
        }
    }
}

impl<S, K, B, RB> Service<Request<B>> for ApiCalls<S, K>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    K: ApiCallSink,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let verb = verb_of(&request);
        let sink = self.sink.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            sink.api_call(ApiCall {
                verb,
                status: result.as_ref().ok().map(Response::status),
                took: started.elapsed(),
            });
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, uri: &str) -> Request<()> {
        Request::builder().method(method).uri(uri).body(()).unwrap()
    }

    #[test]
    fn verbs_follow_method_and_watch_parameter() {
        let cases = [
            (Method::GET, "/api/v1/pods", "get"),
            (
                Method::GET,
                "/api/v1/pods?watch=true&resourceVersion=5",
                "watch",
            ),
            (
                Method::GET,
                "/api/v1/pods?labelSelector=watch%3Dtrue",
                "get",
            ),
            (Method::POST, "/api/v1/namespaces/a/pods", "create"),
            (Method::PUT, "/api/v1/namespaces/a/pods/p", "update"),
            (Method::PATCH, "/api/v1/namespaces/a/pods/p", "patch"),
            (Method::DELETE, "/api/v1/namespaces/a/pods/p", "delete"),
            (Method::OPTIONS, "/", "other"),
        ];
        for (method, uri, verb) in cases {
            assert_eq!(verb_of(&request(method, uri)), verb, "{uri}");
        }
    }

    #[test]
    fn layer_counts_responses_by_verb_and_status() {
        let metrics = Arc::new(Metrics::new("test").unwrap());
        let layer = ApiRequestsLayer::new(metrics.clone());
        let mut service = layer.layer(tower::service_fn(|req: Request<()>| async move {
            let status = if req.uri().path() == "/missing" {
                404
            } else {
                200
            };
            Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            service
                .call(request(Method::GET, "/missing"))
                .await
                .unwrap();
            service.call(request(Method::PATCH, "/x")).await.unwrap();
            service.call(request(Method::PATCH, "/y")).await.unwrap();
        });
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("dra_ledger_api_requests_total{code=\"404\",verb=\"get\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("dra_ledger_api_requests_total{code=\"200\",verb=\"patch\"} 2"),
            "{text}"
        );
    }
}

//! A tower layer for the Kubernetes client that counts every request to the API server in
//! `api_requests_total{verb,code}`. Works on plain `http` requests and responses, so it stacks on
//! a `kube::Client`'s service (`ClientBuilder::with_layer`) without this crate depending on kube.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, Response};
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

/// Counts requests of the wrapped service in [`Metrics`].
#[derive(Debug, Clone)]
pub struct ApiRequestsLayer {
    metrics: Arc<Metrics>,
}

impl ApiRequestsLayer {
    /// A layer recording into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        ApiRequestsLayer { metrics }
    }
}

impl<S> Layer<S> for ApiRequestsLayer {
    type Service = ApiRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiRequests {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service made by [`ApiRequestsLayer`].
#[derive(Debug, Clone)]
pub struct ApiRequests<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> Service<Request<B>> for ApiRequests<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let verb = verb_of(&request);
        let metrics = self.metrics.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            match &result {
                Ok(response) => metrics.record_api_request(verb, response.status().as_str()),
                Err(_) => metrics.record_api_request(verb, "error"),
            }
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

//! The fence: whether this process may write right now, and the two places that ask it.
//!
//! The elector opens the fence until a deadline after each successful acquire or renewal
//! (`sent + renew_deadline`, counted from when the request was SENT, so a slow answer only
//! shortens the window) and closes it when the lease is lost. The ledger's commit guard
//! ([`Fence::commit_guard`]) and the Kubernetes client layer ([`FenceLayer`]: every request that
//! is not a read) refuse once the deadline has passed, so a process that was paused or cut off
//! stops writing before any other candidate can have taken the lease (`lease_duration` after it
//! last saw the lease change).

use dra_runtime::lock::LockExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use dra_allocator::ledger::{CommitGuard, CommitRefusal};
use http::{Method, Request};
use tower::{Layer, Service};

/// Whether this process may write. Clones share the state.
#[derive(Clone, Debug, Default)]
pub struct Fence {
    until: Arc<Mutex<Option<Instant>>>,
    always: bool,
}

/// The error of a write refused by the fence.
#[derive(Debug, thiserror::Error)]
#[error("write refused: {0}")]
pub struct Fenced(pub String);

impl Fence {
    /// A closed fence.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fence that never refuses: the only allocator, without leader election.
    pub fn always_open() -> Self {
        Fence {
            always: true,
            ..Self::default()
        }
    }

    /// Allows writes until `deadline` (never moves an open deadline backwards).
    pub fn open_until(&self, deadline: Instant) {
        let mut until = self.until.lock_or_recover();
        if until.is_none_or(|current| current < deadline) {
            *until = Some(deadline);
        }
    }

    /// Refuses every write from now on (until opened again).
    pub fn close(&self) {
        *self.until.lock_or_recover() = None;
    }

    /// `Ok` while writes are allowed; otherwise why not.
    pub fn check(&self) -> Result<(), Fenced> {
        if self.always {
            return Ok(());
        }
        let until = *self.until.lock_or_recover();
        match until {
            Some(deadline) if Instant::now() < deadline => Ok(()),
            Some(_) => Err(Fenced(
                "the leader lease was not renewed in time; this process is no longer the leader"
                    .to_owned(),
            )),
            None => Err(Fenced(
                "this process does not hold the leader lease".to_owned(),
            )),
        }
    }

    /// The ledger's commit guard over this fence.
    pub fn commit_guard(&self) -> CommitGuard {
        let fence = self.clone();
        Arc::new(move || {
            fence
                .check()
                .map_err(|fenced| -> CommitRefusal { Arc::new(fenced) })
        })
    }
}

/// A tower layer for the Kubernetes client that refuses every request other than GET, HEAD and
/// OPTIONS while the fence is closed. Reads and watches pass.
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: Fence,
}

impl FenceLayer {
    /// A layer asking `fence`.
    pub fn new(fence: Fence) -> Self {
        FenceLayer { fence }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = FencedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FencedService {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// The service made by [`FenceLayer`].
#[derive(Clone, Debug)]
pub struct FencedService<S> {
    inner: S,
    fence: Fence,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> Service<Request<B>> for FencedService<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let read = matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        );
        if !read {
            if let Err(refused) = self.fence.check() {
                tracing::warn!(method = %request.method(), path = %request.uri().path(), reason = %refused.0, "Refused a write to the API server");
                return Box::pin(async move { Err(Box::new(refused) as BoxError) });
            }
        }
        let response = self.inner.call(request);
        Box::pin(async move { response.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn fence_is_closed_until_opened_and_after_its_deadline() {
        let open = Fence::always_open();
        open.close();
        assert!(
            open.check().is_ok(),
            "without leader election nothing is fenced"
        );
        let fence = Fence::new();
        assert!(fence.check().is_err());
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(fence.check().is_ok());
        assert!((fence.commit_guard())().is_ok());
        fence.open_until(Instant::now());
        assert!(
            fence.check().is_ok(),
            "an earlier deadline does not shorten"
        );
        fence.close();
        let refused = (fence.commit_guard())().unwrap_err().to_string();
        assert!(refused.contains("does not hold"), "{refused}");
        fence.open_until(Instant::now());
        std::thread::sleep(Duration::from_millis(2));
        let refused = fence.check().unwrap_err();
        assert!(refused.0.contains("not renewed in time"), "{refused}");
    }

    #[test]
    fn layer_refuses_writes_but_not_reads_while_closed() {
        let fence = Fence::new();
        let mut service = FenceLayer::new(fence.clone()).layer(tower::service_fn(
            |req: Request<()>| async move {
                Ok::<_, std::convert::Infallible>(req.method().to_string())
            },
        ));
        let request = |method: Method| {
            Request::builder()
                .method(method)
                .uri("/x")
                .body(())
                .unwrap()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            assert_eq!(service.call(request(Method::GET)).await.unwrap(), "GET");
            for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
                let error = service.call(request(method)).await.unwrap_err();
                assert!(error.to_string().contains("write refused"), "{error}");
            }
            fence.open_until(Instant::now() + Duration::from_secs(60));
            assert_eq!(service.call(request(Method::PATCH)).await.unwrap(), "PATCH");
        });
    }
}

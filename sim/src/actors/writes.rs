//! Writes to the API server with the retry discipline every actor needs: transient failures
//! (409 conflicts, 429, 5xx, transport errors) are retried with backoff, and read-modify-write of
//! status goes through the status subresource with the live resourceVersion.
//!
//! Must not depend on any actor module; actors depend on it.

use std::fmt::Debug;
use std::future::Future;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::request::Error as RequestError;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::{is_not_found, is_transient, ActorError, Result};
use super::runtime::backoff_delay;

/// How many times a transient failure is retried inside one reconcile before it is handed back to
/// the work queue (which retries again later with its own backoff).
pub const ATTEMPTS: u32 = 8;

/// Writes of one kind whose answer the actor does not use. The server's errors come back as from
/// [`Api`]; the object it answers with is only read as text, not decoded (decoding a pod or an
/// event is most of such a call's cost in the simulator's own process).
#[derive(Clone)]
pub struct Unread {
    client: Client,
    request: kube::core::Request,
}

impl Unread {
    /// Writes to objects of `K` in `namespace`.
    pub fn namespaced<K: Resource<DynamicType = ()>>(client: &Client, namespace: &str) -> Self {
        Self {
            client: client.clone(),
            request: kube::core::Request::new(K::url_path(&(), Some(namespace))),
        }
    }

    async fn send(
        &self,
        request: std::result::Result<http::Request<Vec<u8>>, RequestError>,
    ) -> kube::Result<()> {
        let request = request.map_err(kube::Error::BuildRequest)?;
        self.client.request_text(request).await.map(drop)
    }

    /// Creates `object`.
    pub async fn create(&self, params: &PostParams, object: &impl Serialize) -> kube::Result<()> {
        let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
        self.send(self.request.create(params, body)).await
    }

    /// Patches the object `name`.
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<()> {
        self.send(self.request.patch(name, params, patch)).await
    }

    /// Patches the status of the object `name`.
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<()> {
        self.send(
            self.request
                .patch_subresource("status", name, params, patch),
        )
        .await
    }

    /// Posts `body` to the subresource `subresource` of the object `name`.
    pub async fn create_subresource(
        &self,
        subresource: &str,
        name: &str,
        params: &PostParams,
        body: Vec<u8>,
    ) -> kube::Result<()> {
        self.send(
            self.request
                .create_subresource(subresource, name, params, body),
        )
        .await
    }

    /// Deletes the object `name`.
    pub async fn delete(&self, name: &str, params: &DeleteParams) -> kube::Result<()> {
        self.send(self.request.delete(name, params)).await
    }
}

/// Runs `op` until it succeeds, fails for good, or `ATTEMPTS` transient failures happened.
pub async fn with_retry<T, F, Fut>(action: &str, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match op().await {
            Ok(value) => return Ok(value),
            Err(error) if is_transient(&error) && attempt < ATTEMPTS => {
                tracing::trace!(%error, action, attempt, "transient failure, retrying");
                tokio::time::sleep(backoff_delay(attempt)).await;
            }
            Err(error) => return Err(ActorError::api(action, error)),
        }
    }
}

/// Which part of the object a read-modify-write replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource (spec, metadata).
    Main,
    /// The status subresource.
    Status,
}

/// Reads `name` live, lets `mutate` change it (returning false when nothing needs to change) and
/// writes it back with the read resourceVersion, re-reading on conflicts. Returns the written
/// object, or `None` when the object is gone or `mutate` made no change.
pub async fn read_modify_write<K, F>(
    api: &Api<K>,
    name: &str,
    part: Part,
    action: &str,
    mut mutate: F,
) -> Result<Option<K>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K) -> bool,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut object = match api.get_opt(name).await {
            Ok(Some(object)) => object,
            Ok(None) => return Ok(None),
            Err(error) if is_transient(&error) && attempt < ATTEMPTS => {
                tokio::time::sleep(backoff_delay(attempt)).await;
                continue;
            }
            Err(error) => return Err(ActorError::api(action, error)),
        };
        if !mutate(&mut object) {
            return Ok(None);
        }
        let body = serde_json::to_vec(&object).map_err(|source| ActorError::Encode {
            what: "object",
            source,
        })?;
        let written = match part {
            Part::Main => api.replace(name, &PostParams::default(), &object).await,
            Part::Status => api.replace_status(name, &PostParams::default(), body).await,
        };
        match written {
            Ok(object) => return Ok(Some(object)),
            Err(error) if is_not_found(&error) => return Ok(None),
            Err(error) if is_transient(&error) && attempt < ATTEMPTS => {
                tracing::trace!(%error, action, attempt, "write failed, re-reading");
                tokio::time::sleep(backoff_delay(attempt)).await;
            }
            Err(error) if is_transient(&error) => {
                return Err(ActorError::Conflicts {
                    action: action.to_owned(),
                    attempts: attempt,
                })
            }
            Err(error) => return Err(ActorError::api(action, error)),
        }
    }
}

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
use super::ACTOR_BACKOFF;

/// How many times a transient failure is retried inside one reconcile before it is handed back to
/// the work queue (which retries again later with its own backoff).
pub(crate) const ATTEMPTS: u32 = 8;

/// Writes of one kind whose answer the actor does not use. The server's errors come back as from
/// [`Api`]; the object it answers with is only read as text, not decoded (decoding a pod or an
/// event is most of such a call's cost in the simulator's own process).
#[derive(Clone)]
pub(crate) struct Unread {
    client: Client,
    request: kube::core::Request,
}

impl Unread {
    /// Writes to objects of `K` in `namespace`.
    pub(crate) fn namespaced<K: Resource<DynamicType = ()>>(
        client: &Client,
        namespace: &str,
    ) -> Self {
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
    pub(crate) async fn create(
        &self,
        params: &PostParams,
        object: &impl Serialize,
    ) -> kube::Result<()> {
        let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
        self.send(self.request.create(params, body)).await
    }

    /// Patches the object `name`.
    pub(crate) async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<()> {
        self.send(self.request.patch(name, params, patch)).await
    }

    /// Patches the status of the object `name`.
    pub(crate) async fn patch_status<P: Serialize + Debug>(
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
    pub(crate) async fn create_subresource(
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
    pub(crate) async fn delete(&self, name: &str, params: &DeleteParams) -> kube::Result<()> {
        self.send(self.request.delete(name, params)).await
    }
}

/// Runs `op` until it succeeds, fails for good, or `ATTEMPTS` transient failures happened.
pub(crate) async fn with_retry<T, F, Fut>(action: &str, mut op: F) -> Result<T>
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
                tokio::time::sleep(ACTOR_BACKOFF.backoff(attempt)).await;
            }
            Err(error) => return Err(ActorError::api(action, error)),
        }
    }
}

/// Which part of the object a read-modify-write replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main resource (spec, metadata).
    Main,
    /// The status subresource.
    Status,
}

/// Replaces `part` of the object `name` with `object`, its resourceVersion the precondition.
async fn write_back<K>(api: &Api<K>, name: &str, part: Part, object: &K) -> Result<kube::Result<K>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let params = PostParams::default();
    Ok(match part {
        Part::Main => api.replace(name, &params, object).await,
        Part::Status => {
            let body = serde_json::to_vec(object).map_err(|source| ActorError::Encode {
                what: "object",
                source,
            })?;
            api.replace_status(name, &params, body).await
        }
    })
}

/// [`read_modify_write`] that first tries `known`, the copy of the object the caller already
/// holds (its informer's, or the answer to its previous write), without reading it: as
/// client-go callers under `RetryOnConflict` do, only a conflict (the copy was stale) makes it
/// read the object live. A write that succeeds proves the copy was current; when `mutate` finds
/// nothing to change in the copy, that is decided again on the live object, since the copy
/// may be stale. `mutate` may run twice and must set every flag it reports through each time.
pub(crate) async fn modify_write<K, F>(
    api: &Api<K>,
    name: &str,
    part: Part,
    action: &str,
    mut known: Option<K>,
    mut mutate: F,
) -> Result<Option<K>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K) -> bool,
{
    // Every live read is an attempt; the known copy is tried once, before any.
    let mut attempt = 0;
    loop {
        let (mut object, copy) = if let Some(copy) = known.take() {
            (copy, true)
        } else {
            attempt += 1;
            match api.get_opt(name).await {
                Ok(Some(object)) => (object, false),
                Ok(None) => return Ok(None),
                Err(error) if is_transient(&error) && attempt < ATTEMPTS => {
                    tokio::time::sleep(ACTOR_BACKOFF.backoff(attempt)).await;
                    continue;
                }
                Err(error) => return Err(ActorError::api(action, error)),
            }
        };
        if !mutate(&mut object) {
            if copy {
                continue;
            }
            return Ok(None);
        }
        match write_back(api, name, part, &object).await? {
            Ok(object) => return Ok(Some(object)),
            Err(error) if is_not_found(&error) => return Ok(None),
            Err(error) if is_transient(&error) && copy => {
                tracing::trace!(%error, action, "write of a known copy failed, reading it");
            }
            Err(error) if is_transient(&error) && attempt < ATTEMPTS => {
                tracing::trace!(%error, action, attempt, "write failed, re-reading");
                tokio::time::sleep(ACTOR_BACKOFF.backoff(attempt)).await;
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

/// Reads `name` live, lets `mutate` change it (returning false when nothing needs to change) and
/// writes it back with the read resourceVersion, re-reading on conflicts. Returns the written
/// object, or `None` when the object is gone or `mutate` made no change.
pub(crate) async fn read_modify_write<K, F>(
    api: &Api<K>,
    name: &str,
    part: Part,
    action: &str,
    mutate: F,
) -> Result<Option<K>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K) -> bool,
{
    modify_write(api, name, part, action, None, mutate).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{Faults, ServerConfig, SimServer};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn set(key: &'static str) -> impl FnMut(&mut ConfigMap) -> bool {
        move |cm| {
            let data = cm.data.get_or_insert_with(Default::default);
            data.insert(key.into(), "1".into()).is_none()
        }
    }

    #[tokio::test]
    async fn a_current_copy_is_written_without_reading_and_a_stale_one_is_read_again() {
        let server = SimServer::start(ServerConfig::default()).await.unwrap();
        let api: Api<ConfigMap> = Api::default_namespaced(server.kube_client().unwrap());
        let created = api
            .create(&PostParams::default(), &config_map("c"))
            .await
            .unwrap();

        // Every read fails: only a write that needs no read can succeed.
        server.set_faults(Faults::seeded(1).read_errors(1.0));
        let written = modify_write(
            &api,
            "c",
            Part::Main,
            "set a",
            Some(created.clone()),
            set("a"),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(written.data.unwrap()["a"], "1");
        assert!(
            read_modify_write(&api, "c", Part::Main, "set b", set("b"))
                .await
                .is_err(),
            "a read-modify-write needs the read"
        );

        // `created` is stale now: its write conflicts and the live object is changed instead.
        server.set_faults(Faults::none());
        let written = modify_write(
            &api,
            "c",
            Part::Main,
            "set b",
            Some(created.clone()),
            set("b"),
        )
        .await
        .unwrap()
        .unwrap();
        let data = written.data.unwrap();
        assert_eq!((data["a"].as_str(), data["b"].as_str()), ("1", "1"));

        // A copy in which nothing needs to change is not trusted: the live object decides.
        let mut ahead = created;
        ahead.data = Some([("c".to_owned(), "1".to_owned())].into());
        let written = modify_write(&api, "c", Part::Main, "set c", Some(ahead), set("c"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(written.data.unwrap()["c"], "1");
        server.shutdown().await;
    }
}

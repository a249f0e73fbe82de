//! The framework against a real API server: [`KubeApi`] implements [`ClusterApi`] over
//! `kube::Client`, and `Watches` runs the reflectors that fill [`ReflectorCaches`] and call the
//! controller's event handlers.
//!
//! The only module that talks to the network; must not contain sync decisions.

use std::future::Future;

use async_trait::async_trait;
use dra_runtime::events::{EventRecord, EventRecorder};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim, ResourceClass};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::warn;

use super::api::ClusterApi;
use super::caches::ReflectorCaches;
use super::claim_store::ClaimStore;
use super::controller::Controller;
use super::driver::Driver;
use super::error::{KubeCallError, KubeCallErrorKind};
use super::pod_claims::PodClaims;

/// [`ClusterApi`] over a `kube::Client`. Events are events.k8s.io/v1 events reported by
/// `resource driver <name>`.
pub struct KubeApi {
    client: Client,
    recorder: EventRecorder,
}

impl KubeApi {
    /// Writes through `client` on behalf of driver `driver_name`.
    pub fn new(client: Client, driver_name: &str) -> Self {
        Self {
            recorder: EventRecorder::new(client.clone(), driver_name),
            client,
        }
    }

    fn claims(&self, claim: &ResourceClaim) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default())
    }
}

/// The message of kube-apiserver's 422 for a JSON patch that does not apply: its generic
/// `Invalid` text, without the patch library's reason. Our JSON patches begin with a `test` of
/// the resourceVersion and address list entries by index, so they fail to apply only when the
/// object changed since it was read. A validation failure names the object instead
/// (`<Kind> "<name>" is invalid: ...`).
const JSON_PATCH_NOT_APPLIED: &str =
    "the server rejected our request due to an error in our request";

/// Maps a client error to the framework's [`KubeCallError`].
#[allow(clippy::needless_pass_by_value)] // used as `map_err(kube_call_error)`
pub fn kube_call_error(error: kube::Error) -> KubeCallError {
    let kind = match &error {
        kube::Error::Api(response) if response.code == 404 => KubeCallErrorKind::NotFound,
        kube::Error::Api(response) if response.code == 409 => KubeCallErrorKind::Conflict,
        kube::Error::Api(response)
            if response.code == 422 && response.message == JSON_PATCH_NOT_APPLIED =>
        {
            KubeCallErrorKind::Conflict
        }
        _ => KubeCallErrorKind::Other,
    };
    KubeCallError::new(kind, error.to_string())
}

impl KubeApi {
    /// Replaces the claim, or its status subresource when `status`.
    async fn replace_claim(
        &self,
        claim: &ResourceClaim,
        status: bool,
    ) -> Result<ResourceClaim, KubeCallError> {
        let (claims, name, params) = (self.claims(claim), claim.name_any(), PostParams::default());
        let written = if status {
            let body = serde_json::to_vec(claim)
                .map_err(|e| KubeCallError::new(KubeCallErrorKind::Other, e.to_string()))?;
            claims.replace_status(&name, &params, body).await
        } else {
            claims.replace(&name, &params, claim).await
        };
        written.map_err(kube_call_error)
    }
}

#[async_trait]
impl ClusterApi for KubeApi {
    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, KubeCallError> {
        self.replace_claim(claim, false).await
    }

    async fn update_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, KubeCallError> {
        self.replace_claim(claim, true).await
    }

    async fn patch_scheduling_context_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &json_patch::Patch,
    ) -> Result<PodSchedulingContext, KubeCallError> {
        Api::<PodSchedulingContext>::namespaced(self.client.clone(), namespace)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::<()>::Json(patch.clone()),
            )
            .await
            .map_err(kube_call_error)
    }

    async fn post_event(&self, event: EventRecord) -> Result<(), KubeCallError> {
        let action = event.reason.clone();
        self.recorder
            .post(&action, event)
            .await
            .map_err(kube_call_error)
    }
}

/// The four watches of the controller with the writers of their stores.
pub(crate) struct Watches {
    client: Client,
    claims: ClaimStore,
    classes: Writer<ResourceClass>,
    contexts: Writer<PodSchedulingContext>,
    pods: Writer<Pod>,
    caches: ReflectorCaches,
}

/// What a watch event means for the controller.
enum Change<K> {
    Changed(K),
    Deleted(K),
}

/// What a watch caches: a cluster-wide kind of object the store can hold.
trait Watched:
    kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static
{
}

fn watch<K>(client: Client, writer: Writer<K>) -> impl Stream<Item = Change<K>> + Send + 'static
where
    K: Watched + DeserializeOwned,
{
    watch_as::<K, K>(client, writer)
}

/// [`watch`] of objects decoded as `S` (the part of the object the controller reads) and cached
/// as `K`.
fn watch_as<S, K>(
    client: Client,
    writer: Writer<K>,
) -> impl Stream<Item = Change<K>> + Send + 'static
where
    S: Watched + DeserializeOwned + Into<K>,
    K: Watched,
{
    let stream = watcher(Api::<S>::all(client), watcher::Config::default())
        .map(|event| event.map(|event| convert(event, Into::into)))
        .default_backoff()
        // Managed fields are never read; dropping them keeps the caches small.
        .modify(|o: &mut K| o.meta_mut().managed_fields = None);
    reflector::reflector(writer, stream).filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => Some(Change::Changed(o)),
            Ok(watcher::Event::Delete(o)) => Some(Change::Deleted(o)),
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(error) => {
                warn!(%error, kind = K::kind(&()).as_ref(), "Watch failed, retrying");
                None
            }
        }
    })
}

/// The claim watch, filling the claim store as kube-rs's reflector fills its stores: a listing
/// replaces the cache once complete.
fn watch_claims(
    client: Client,
    store: ClaimStore,
) -> impl Stream<Item = Change<ResourceClaim>> + Send + 'static {
    watcher(
        Api::<ResourceClaim>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .filter_map(move |event| {
        let change = match event {
            Ok(watcher::Event::Init) => {
                store.begin_listing();
                None
            }
            Ok(watcher::Event::InitDone) => {
                store.end_listing();
                None
            }
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                store.apply(&o);
                Some(Change::Changed(o))
            }
            Ok(watcher::Event::Delete(o)) => {
                store.delete(&o);
                Some(Change::Deleted(o))
            }
            Err(error) => {
                warn!(%error, kind = "ResourceClaim", "Watch failed, retrying");
                None
            }
        };
        std::future::ready(change)
    })
}

/// A watch event of `S` as one of `K`.
fn convert<S, K>(event: watcher::Event<S>, into: impl Fn(S) -> K) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(into(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(into(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(into(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

impl Watches {
    pub(crate) fn new(client: Client) -> (Self, ReflectorCaches) {
        let claims = ClaimStore::new();
        let (classes_store, classes) = reflector::store();
        let (contexts_store, contexts) = reflector::store();
        let (pods_store, pods) = reflector::store();
        let caches = ReflectorCaches {
            claims: claims.clone(),
            classes: classes_store,
            contexts: contexts_store,
            pods: pods_store,
        };
        (
            Self {
                client,
                claims,
                classes,
                contexts,
                pods,
                caches: caches.clone(),
            },
            caches,
        )
    }

    /// Completes once every store has seen its initial list.
    pub(crate) fn ready(&self) -> impl Future<Output = ()> + Send + 'static {
        let caches = self.caches.clone();
        async move {
            let _ = futures::join!(
                caches.claims.wait_until_ready(),
                caches.classes.wait_until_ready(),
                caches.contexts.wait_until_ready(),
                caches.pods.wait_until_ready(),
            );
        }
    }

    /// Runs the watches forever, feeding the stores and the controller's handlers.
    pub(crate) async fn run<D: Driver>(self, controller: Controller<D>) {
        let claims = watch_claims(self.client.clone(), self.claims).map(|c| match c {
            Change::Changed(o) => controller.claim_changed(&o),
            Change::Deleted(o) => controller.claim_deleted(&o),
        });
        let classes = watch(self.client.clone(), self.classes).map(|c| {
            if let Change::Changed(o) = c {
                controller.class_changed(&o);
            }
        });
        let contexts = watch(self.client.clone(), self.contexts).map(|c| match c {
            Change::Changed(o) => controller.scheduling_context_changed(&o),
            Change::Deleted(o) => controller.scheduling_context_deleted(&o),
        });
        let pods = watch_as::<PodClaims, Pod>(self.client, self.pods).map(|c| {
            if let Change::Changed(o) = c {
                controller.pod_changed(&o);
            }
        });
        let all = futures::stream::select_all([
            claims.boxed(),
            classes.boxed(),
            contexts.boxed(),
            pods.boxed(),
        ]);
        all.for_each(|()| async {}).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ErrorResponse;

    fn response(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(ErrorResponse {
            status: "Failure".into(),
            message: message.into(),
            reason: String::new(),
            code,
        })
    }

    #[test]
    fn client_errors_map_to_kinds() {
        assert_eq!(
            kube_call_error(response(404, "gone")).kind,
            KubeCallErrorKind::NotFound
        );
        assert_eq!(
            kube_call_error(response(409, "modified")).kind,
            KubeCallErrorKind::Conflict
        );
        assert_eq!(
            kube_call_error(response(
                422,
                "the server rejected our request due to an error in our request"
            ))
            .kind,
            KubeCallErrorKind::Conflict,
            "kube-apiserver's answer to a JSON patch whose resourceVersion test failed"
        );
        assert_eq!(
            kube_call_error(response(
                422,
                "PodSchedulingContext.resource.k8s.io \"p\" is invalid: status.resourceClaims[0].unsuitableNodes: Too many: 129: must have at most 128 items"
            ))
            .kind,
            KubeCallErrorKind::Other,
            "a validation failure"
        );
        assert_eq!(
            kube_call_error(response(500, "boom")).kind,
            KubeCallErrorKind::Other
        );
        assert!(kube_call_error(response(500, "boom"))
            .message
            .contains("boom"));
    }
}

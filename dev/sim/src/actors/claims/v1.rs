//! The kube-controller-manager `resourceclaim` controller of Kubernetes 1.34
//! (`resource.k8s.io/v1`): creates the claims of pods' template claims and records them in
//! `status.resourceClaimStatuses` (a `FailedResourceClaimCreation` event when it cannot), reserves
//! allocated claims for pods that are already on a node, drops stale `reservedFor` entries and
//! deallocates a claim with the delete-protection finalizer when its last consumer goes (then
//! removes the finalizer), and deletes the claims of pods that are done.
//!
//! Talks to the API server only through `kube::Client`; reads come from the shared informer
//! stores, decisions from the generated and reservations modules.

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim, PodResourceClaimStatus};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::generated::{claim_from_template, is_pod_done, pod_needs_claims, pod_needs_work};
use super::owning_pod_of;
use super::reservations::{
    clear_allocation, drop_stale, release_finalizer, reserve_for, unsupported, DeletedPods,
    PodState,
};
use crate::actors::claim_refs::{
    claim_name, is_for_pod, is_reserved_for_pod, pod_claim_entries, resolved_claim_keys,
    resolved_claim_names, NameError,
};
use crate::actors::error::{is_not_found, ActorError, Result};
use crate::actors::events::{post_pod_warning, Reporter};
use crate::actors::indexes::{ClaimUsers, OwnedClaims};
use crate::actors::writes::{read_modify_write, with_retry, Part};
use crate::actors::ACTOR_BACKOFF;
use crate::actors::{ObjectKey, POD_CLAIM_NAME_ANNOTATION};
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};
use dra_types::resource_v1::{ResourceClaim, ResourceClaimTemplate};

/// The event reason of a template claim the controller could not create.
pub const FAILED_CREATION_REASON: &str = "FailedResourceClaimCreation";

/// The component name the controller posts events as.
const COMPONENT: &str = "resource_claim";

/// The 1.34 resourceclaim controller: a pod queue (claims to create or reserve) and a claim queue
/// (reservations to clean, claims to delete).
pub struct ClaimControllerV1 {
    client: Client,
    pods: Store<Pod>,
    claims: Store<ResourceClaim>,
    templates: Store<ResourceClaimTemplate>,
    deleted: Mutex<DeletedPods>,
    /// Claims this controller created that the claim store may not show yet, by pod UID (the
    /// upstream controller's mutation cache): a retried sync adopts them instead of creating
    /// another.
    created: Mutex<HashMap<String, Vec<ResourceClaim>>>,
    /// The claims of the store by the UID of the pod that controls them.
    owned: OwnedClaims,
    /// The pods of the store that use each claim.
    users: ClaimUsers,
    /// Pods to sync.
    pub pod_queue: WorkQueue<ObjectKey>,
    /// Claims to sync.
    pub claim_queue: WorkQueue<ObjectKey>,
}

/// The claims to create and record: `(pod claim name, claim name)`.
type NewStatuses = Vec<(String, String)>;

/// Why the claim of a template pod claim cannot be made; the text is the event's, upstream's.
#[derive(Debug, thiserror::Error)]
enum ClaimCreationError {
    /// The pod claim names no claim in a way the controller knows.
    #[error("checking for claim before creating it: {0}")]
    Name(#[source] NameError),
    /// The template does not exist.
    #[error("resource claim template \"{template}\": resourceclaimtemplate.resource.k8s.io \"{template}\" not found")]
    TemplateNotFound {
        /// The template's name.
        template: String,
    },
    /// The template cannot be read.
    #[error("resource claim template \"{template}\": {source}")]
    TemplateRead {
        /// The template's name.
        template: String,
        /// The read's error.
        #[source]
        source: ActorError,
    },
    /// The API server refused the claim (it has no name yet: the server generates it).
    #[error("create ResourceClaim : {}", create_refusal(.0))]
    Create(#[source] ActorError),
}

/// An API error as the server's message, any other error as it is.
fn create_refusal(error: &ActorError) -> String {
    match error {
        ActorError::Api { source, .. } => api_message(source),
        other => other.to_string(),
    }
}

fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) => response.message.clone(),
        other => other.to_string(),
    }
}

impl ClaimControllerV1 {
    /// A controller reading the given stores.
    pub fn new(
        client: Client,
        pods: Store<Pod>,
        claims: Store<ResourceClaim>,
        templates: Store<ResourceClaimTemplate>,
    ) -> Self {
        Self {
            client,
            pods,
            claims,
            templates,
            deleted: Mutex::new(DeletedPods::default()),
            created: Mutex::new(HashMap::new()),
            owned: OwnedClaims::new(),
            users: ClaimUsers::new(),
            pod_queue: WorkQueue::new(ACTOR_BACKOFF),
            claim_queue: WorkQueue::new(ACTOR_BACKOFF),
        }
    }

    /// The claim `name` in `namespace`, from the store or, when the store does not show it yet,
    /// from the claims this controller created.
    fn claim(&self, namespace: &str, name: &str) -> Option<ResourceClaim> {
        if let Some(claim) = self.claims.get(&ObjectRef::new(name).within(namespace)) {
            return Some((*claim).clone());
        }
        self.created
            .lock_or_recover()
            .values()
            .flatten()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(namespace)
                    && c.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    /// Routes a pod change: the claims of a pod that no longer needs them, and the pod itself when
    /// it needs work.
    pub fn on_pod(&self, change: &Change<'_, Pod>) {
        match change {
            Change::Applied(pod) => {
                self.users
                    .set(ObjectKey::of(&pod.metadata), resolved_claim_keys(pod));
                self.route_pod(pod, false);
            }
            Change::Deleted(pod) => {
                self.users.remove(&ObjectKey::of(&pod.metadata));
                if let Some(uid) = &pod.metadata.uid {
                    self.deleted.lock_or_recover().add(uid);
                    self.created.lock_or_recover().remove(uid);
                }
                self.route_pod(pod, true);
            }
            Change::Resynced => {
                let pods = self.pods.state();
                let users = pods
                    .iter()
                    .map(|pod| (ObjectKey::of(&pod.metadata), resolved_claim_keys(pod)));
                self.users.reset(users.collect::<Vec<_>>());
                // Pods deleted while the watch was down produced no deletion.
                for claim in self.claims.state() {
                    self.claim_queue.add(&ObjectKey::of(&claim.metadata));
                }
            }
        }
    }

    fn route_pod(&self, pod: &Pod, deleted: bool) {
        if !pod_needs_claims(pod, deleted) {
            // The claim the scheduler made for the pod's extended resources is in no pod claim
            // entry: it is found as a claim the pod controls.
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            for key in self.owned.of_pod(uid) {
                self.claim_queue.add(&key);
            }
        }
        if pod_claim_entries(pod).is_empty() {
            return;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        if !pod_needs_claims(pod, deleted) {
            for name in resolved_claim_names(pod) {
                self.claim_queue.add(&ObjectKey::new(&namespace, &name));
            }
        }
        if deleted {
            return;
        }
        let work = pod_needs_work(pod, &|name| self.claim(&namespace, name));
        if work.needed {
            tracing::trace!(pod = ?pod.metadata.name, reason = %work.reason, "Pod needs the resourceclaim controller");
            self.pod_queue.add(&ObjectKey::of(&pod.metadata));
        }
    }

    /// Routes a claim change: the claim itself, and the pods that use it.
    pub fn on_claim(&self, change: &Change<'_, ResourceClaim>) {
        let claim = match change {
            Change::Applied(claim) => {
                self.owned.applied(&claim.metadata);
                self.claim_queue.add(&ObjectKey::of(&claim.metadata));
                claim
            }
            Change::Deleted(claim) => {
                self.owned.deleted(&claim.metadata);
                claim
            }
            Change::Resynced => {
                let claims = self.claims.state();
                self.owned.reset(claims.iter().map(|c| &c.metadata));
                return;
            }
        };
        for key in self.users.of(&ObjectKey::of(&claim.metadata)) {
            if let Some(pod) = self
                .pods
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
            {
                self.route_pod(&pod, false);
            }
        }
    }

    /// Creates and records the pod's template claims, then reserves its allocated claims if the
    /// pod is already on a node.
    pub async fn sync_pod(&self, key: ObjectKey) -> Result<Next> {
        let Some(pod) = self
            .pods
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
        else {
            return Ok(Next::Done);
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(Next::Done);
        }
        let mut new_statuses = NewStatuses::new();
        for entry in pod_claim_entries(&pod) {
            if let Err(error) = self.handle_claim(&pod, entry, &mut new_statuses).await {
                let message = format!("PodResourceClaim {}: {error}", entry.name);
                let reporter = Reporter {
                    component: COMPONENT,
                    host: None,
                };
                post_pod_warning(
                    &self.client,
                    &pod,
                    reporter,
                    FAILED_CREATION_REASON,
                    &message,
                )
                .await;
                return Err(ActorError::Sync(format!("pod {key}, {message}")));
            }
        }
        if !new_statuses.is_empty() {
            self.record(&pod, &key, new_statuses).await?;
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if !bound {
            return Ok(Next::Done);
        }
        for entry in pod_claim_entries(&pod) {
            let name = match claim_name(&pod, entry) {
                Ok(Some(name)) => name,
                Ok(None) => continue,
                Err(error) => return Err(ActorError::Sync(error.to_string())),
            };
            let Some(claim) = self.claim(&key.namespace, &name.name) else {
                return Ok(Next::Done);
            };
            if name.check_owner {
                is_for_pod(&pod, &claim.metadata).map_err(|e| ActorError::Sync(e.to_string()))?;
            }
            if claim.is_allocated() && !is_reserved_for_pod(&pod, &claim) {
                self.reserve(&pod, &key.namespace, &name.name).await?;
            }
        }
        Ok(Next::Done)
    }

    /// Makes sure the claim of a template pod claim exists; a new or adopted one is added to
    /// `new_statuses`. The error is the text of the event.
    async fn handle_claim(
        &self,
        pod: &Pod,
        entry: &PodResourceClaim,
        new_statuses: &mut NewStatuses,
    ) -> std::result::Result<(), ClaimCreationError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        match claim_name(pod, entry) {
            Err(NameError::NotCreated { .. }) => {}
            Err(error) => return Err(ClaimCreationError::Name(error)),
            Ok(None) => return Ok(()),
            Ok(Some(name)) => {
                // Recorded in the status; re-created only if it was deleted or is not the pod's.
                if let Some(claim) = self.claim(&namespace, &name.name) {
                    let owned = !name.check_owner || is_for_pod(pod, &claim.metadata).is_ok();
                    if owned {
                        return Ok(());
                    }
                    tracing::warn!(pod = ?pod.metadata.name, claim = %name.name, "The claim created for the pod is no longer owned by it, creating a new one");
                }
            }
        }
        let Some(template_name) = entry
            .source
            .as_ref()
            .and_then(|s| s.resource_claim_template_name.clone())
        else {
            return Ok(());
        };
        let claim = match self.find_pod_claim(pod, &entry.name) {
            Some(claim) => claim,
            None => self.create_claim(pod, entry, &template_name).await?,
        };
        new_statuses.push((
            entry.name.clone(),
            claim.metadata.name.clone().unwrap_or_default(),
        ));
        Ok(())
    }

    /// A claim controlled by the pod and annotated with the pod claim's name: one created before a
    /// crash or a failed status write is adopted, not duplicated.
    fn find_pod_claim(&self, pod: &Pod, pod_claim: &str) -> Option<ResourceClaim> {
        let namespace = pod.metadata.namespace.as_deref();
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let matches = |claim: &ResourceClaim| {
            claim.metadata.namespace.as_deref() == namespace
                && owning_pod_of(&claim.metadata).is_some_and(|(_, uid)| uid == pod_uid)
                && claim
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
                    .is_some_and(|n| n == pod_claim)
        };
        let stored = self.owned.find(pod_uid, &self.claims, matches);
        if let Some(claim) = stored {
            return Some((*claim).clone());
        }
        self.created
            .lock_or_recover()
            .get(pod_uid)
            .into_iter()
            .flatten()
            .find(|c| matches(c))
            .cloned()
    }

    async fn create_claim(
        &self,
        pod: &Pod,
        entry: &PodResourceClaim,
        template_name: &str,
    ) -> std::result::Result<ResourceClaim, ClaimCreationError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let cached = self
            .templates
            .get(&ObjectRef::new(template_name).within(&namespace))
            .map(|t| (*t).clone());
        let template = if let Some(template) = cached {
            template
        } else {
            // The store may lag behind a template created a moment ago.
            let api: Api<ResourceClaimTemplate> = Api::namespaced(self.client.clone(), &namespace);
            match with_retry("get resourceclaimtemplate", || api.get_opt(template_name)).await {
                Ok(Some(template)) => template,
                Ok(None) => {
                    return Err(ClaimCreationError::TemplateNotFound {
                        template: template_name.to_owned(),
                    })
                }
                Err(source) => {
                    return Err(ClaimCreationError::TemplateRead {
                        template: template_name.to_owned(),
                        source,
                    })
                }
            }
        };
        let claim = claim_from_template(pod, &entry.name, &template);
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let params = PostParams::default();
        let created = with_retry("create claim", || api.create(&params, &claim))
            .await
            .map_err(ClaimCreationError::Create)?;
        tracing::debug!(claim.name = ?created.metadata.name, pod = ?pod.metadata.name, "Created claim from template");
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        self.created
            .lock_or_recover()
            .entry(pod_uid)
            .or_default()
            .push(created.clone());
        Ok(created)
    }

    /// Writes the new entries of `status.resourceClaimStatuses` (the list is replaced whole, with
    /// the entries already recorded kept).
    async fn record(&self, pod: &Pod, key: &ObjectKey, new_statuses: NewStatuses) -> Result<()> {
        let mut statuses: Vec<PodResourceClaimStatus> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        for (pod_claim, claim) in new_statuses {
            statuses.retain(|s| s.name != pod_claim);
            statuses.push(PodResourceClaimStatus {
                name: pod_claim,
                resource_claim_name: Some(claim),
            });
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let patch = serde_json::json!({
            "metadata": { "uid": pod.metadata.uid },
            "status": { "resourceClaimStatuses": statuses },
        });
        let action = format!("update pod {key} ResourceClaimStatuses");
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        match with_retry(&action, || pods.patch_status(&key.name, &params, &patch)).await {
            Ok(_) => Ok(()),
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn reserve(&self, pod: &Pod, namespace: &str, claim: &str) -> Result<()> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let action = format!("reserve claim {namespace}/{claim} for pod");
        read_modify_write(&api, claim, Part::Status, &action, |claim| {
            reserve_for(claim, &pod_name, &pod_uid)
        })
        .await?;
        tracing::debug!(claim, pod = %pod_name, "Reserved claim for a pod on its node");
        Ok(())
    }

    /// What is known of the pod a `reservedFor` entry names; a pod the store does not have is
    /// looked up live before it is declared gone.
    async fn pod_state(&self, namespace: &str, name: &str, uid: &str) -> Result<PodState> {
        if self.deleted.lock_or_recover().has(uid) {
            return Ok(PodState::Deleted);
        }
        if let Some(pod) = self.pods.get(&ObjectRef::new(name).within(namespace)) {
            return Ok(if pod.metadata.uid.as_deref() != Some(uid) {
                PodState::GoneOrReplaced
            } else if is_pod_done(&pod) {
                PodState::Done
            } else {
                PodState::Active
            });
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let live = with_retry("get pod", || pods.get_opt(name)).await?;
        Ok(match live {
            Some(pod) if pod.metadata.uid.as_deref() == Some(uid) => PodState::Active,
            _ => PodState::GoneOrReplaced,
        })
    }

    /// Drops stale reservations (deallocating and releasing the claim when the last one goes),
    /// finishes the release of an unreserved claim being deleted, and deletes an unreserved
    /// claim whose pod is done or replaced.
    pub async fn sync_claim(&self, key: ObjectKey) -> Result<Next> {
        let Some(claim) = self
            .claims
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
        else {
            return Ok(Next::Done);
        };
        let reserved = claim.reserved_for();
        if let Some(other) = unsupported(reserved) {
            return Err(ActorError::Sync(format!(
                "unsupported ReservedFor entry: {other:?}"
            )));
        }
        let mut stale = Vec::new();
        for entry in reserved {
            let pod = self
                .pod_state(&key.namespace, &entry.name, &entry.uid)
                .await?;
            if !pod.keeps_reservation() {
                stale.push(entry.uid.clone());
            }
        }
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let unreserved = reserved.len() == stale.len();
        if !stale.is_empty() {
            let action = format!("drop reservations of claim {key}");
            let written = read_modify_write(&api, &key.name, Part::Status, &action, |claim| {
                drop_stale(claim, &stale)
            })
            .await?;
            if written.is_some_and(|w| w.has_delete_protection() && !w.is_allocated()) {
                self.release(&api, &key).await?;
            }
        } else if claim.has_delete_protection()
            && claim.metadata.deletion_timestamp.is_some()
            && unreserved
        {
            if claim.is_allocated() {
                let action = format!("deallocate claim {key} being deleted");
                read_modify_write(&api, &key.name, Part::Status, &action, clear_allocation).await?;
            }
            self.release(&api, &key).await?;
        }
        if unreserved {
            self.delete_if_pod_done(&api, &claim, &key).await?;
        }
        Ok(Next::Done)
    }

    async fn release(&self, api: &Api<ResourceClaim>, key: &ObjectKey) -> Result<()> {
        let action = format!("remove the delete-protection finalizer of claim {key}");
        read_modify_write(api, &key.name, Part::Main, &action, release_finalizer).await?;
        Ok(())
    }

    async fn delete_if_pod_done(
        &self,
        api: &Api<ResourceClaim>,
        claim: &ResourceClaim,
        key: &ObjectKey,
    ) -> Result<()> {
        let Some((pod_name, pod_uid)) = owning_pod_of(&claim.metadata) else {
            return Ok(());
        };
        // Only a pod known to the store is judged here; a pod that is truly gone is the garbage
        // collector's business.
        let Some(pod) = self
            .pods
            .get(&ObjectRef::new(&pod_name).within(&key.namespace))
        else {
            return Ok(());
        };
        if pod.metadata.uid.as_deref() == Some(pod_uid.as_str()) && !is_pod_done(&pod) {
            return Ok(());
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: claim.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let action = format!("delete claim {key} of finished pod");
        match with_retry(&action, || api.delete(&key.name, &params)).await {
            Ok(_) => {
                tracing::debug!(claim.name = %key, pod = %pod_name, "Deleted unused generated claim");
                Ok(())
            }
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

//! The kube-controller-manager `resourceclaim` controller of Kubernetes 1.30: creates claims from
//! the pod's `ResourceClaimTemplates` (generateName `<pod>-<podClaim>-`, owned by the pod, annotated
//! with the pod claim name) and records them in `pod.status.resourceClaimStatuses`; drops
//! `reservedFor` entries of pods that are gone, replaced or done, requesting deallocation when a
//! `WaitForFirstConsumer` claim loses its last consumer; deletes generated claims of done pods.
//!
//! Talks to the API server only through `kube::Client`; reads come from the shared informer stores.
//! The 1.34 controller (`resource.k8s.io/v1`) is [`v1`], with its decisions in
//! [`generated`] and [`reservations`]; it shares the owner helpers here.

pub mod generated;
pub mod reservations;
pub mod v1;

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::error::{is_not_found, ActorError, Result};
use super::indexes::OwnedClaims;
use super::writes::{read_modify_write, with_retry, Part, Unread};
use super::{pod_claim_names, ObjectKey, ACTOR_BACKOFF, POD_CLAIM_NAME_ANNOTATION};
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};

/// The resourceclaim controller: a pod queue (claim creation) and a claim queue (reservations).
pub struct ClaimController {
    client: Client,
    pods: Store<Pod>,
    claims: Store<ResourceClaim>,
    templates: Store<ResourceClaimTemplate>,
    /// The claims of the store by the UID of the pod that controls them.
    owned: OwnedClaims,
    /// The claims this controller created that the store may not show yet, by pod UID and pod
    /// claim name (upstream's mutation cache): a sync of a pod whose cached status predates the
    /// controller's own write adopts them instead of creating others.
    created: Mutex<HashMap<(String, String), String>>,
    /// Pods whose template claims may need creating.
    pub pod_queue: WorkQueue<ObjectKey>,
    /// Claims whose reservations may need cleaning.
    pub claim_queue: WorkQueue<ObjectKey>,
}

/// Whether the pod has finished running (it will never need its claims again).
pub fn is_pod_done(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pod claims made from templates that have no entry in `status.resourceClaimStatuses` yet:
/// `(pod claim name, template name)`.
pub fn missing_template_claims(pod: &Pod) -> Vec<(String, String)> {
    let statuses = recorded_statuses(pod);
    pod.spec
        .iter()
        .flat_map(|spec| spec.resource_claims.iter().flatten())
        .filter_map(|entry| {
            let template = entry
                .source
                .as_ref()?
                .resource_claim_template_name
                .clone()?;
            let recorded = statuses.iter().any(|s| s.name == entry.name);
            (!recorded).then(|| (entry.name.clone(), template))
        })
        .collect()
}

fn recorded_statuses(pod: &Pod) -> Vec<PodResourceClaimStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default()
}

/// The owner reference a pod puts on the objects it controls.
pub fn pod_owner_reference(pod: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The metadata of the claim the controller creates for `pod_claim` of `pod` from a template
/// whose claims get `template_meta`, in either generation: `generate_name`, the pod's namespace,
/// the template's labels and annotations with the pod claim's name added, the pod as controller.
pub fn generated_claim_metadata(
    pod: &Pod,
    pod_claim: &str,
    template_meta: Option<&ObjectMeta>,
    generate_name: String,
) -> ObjectMeta {
    let template_meta = template_meta.cloned().unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), pod_claim.into());
    ObjectMeta {
        generate_name: Some(generate_name),
        namespace: pod.metadata.namespace.clone(),
        labels: template_meta.labels,
        annotations: Some(annotations),
        owner_references: Some(vec![pod_owner_reference(pod)]),
        ..ObjectMeta::default()
    }
}

/// The claim the controller creates for `pod_claim_name` of `pod` from `template`.
pub fn claim_from_template(
    pod: &Pod,
    pod_claim_name: &str,
    template: &ResourceClaimTemplate,
) -> ResourceClaim {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    ResourceClaim {
        metadata: generated_claim_metadata(
            pod,
            pod_claim_name,
            template.spec.metadata.as_ref(),
            format!("{pod_name}-{pod_claim_name}-"),
        ),
        spec: template.spec.spec.clone(),
        status: None,
    }
}

/// The controlling pod of a claim generated from a template: `(name, uid)`.
pub fn owning_pod(claim: &ResourceClaim) -> Option<(String, String)> {
    owning_pod_of(&claim.metadata)
}

/// The controlling pod (a `v1` `Pod` owner with `controller: true`) of an object: `(name, uid)`.
pub fn owning_pod_of(meta: &ObjectMeta) -> Option<(String, String)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.kind == "Pod" && r.api_version == "v1")
        .map(|r| (r.name.clone(), r.uid.clone()))
}

/// Whether a claim uses delayed (`WaitForFirstConsumer`) allocation, the default mode.
pub fn is_delayed(claim: &ResourceClaim) -> bool {
    claim.spec.allocation_mode.as_deref() != Some("Immediate")
}

/// Removes the `reservedFor` entries whose pod UID is in `gone` and, when that empties the list of
/// an allocated `WaitForFirstConsumer` claim, requests deallocation. Returns whether it changed.
pub fn drop_reservations(claim: &mut ResourceClaim, gone: &[String]) -> bool {
    let Some(status) = claim.status.as_mut() else {
        return false;
    };
    let Some(reserved) = status.reserved_for.as_mut() else {
        return false;
    };
    let before = reserved.len();
    reserved.retain(|r| !(r.resource == "pods" && gone.contains(&r.uid)));
    if reserved.len() == before {
        return false;
    }
    if reserved.is_empty() {
        status.reserved_for = None;
        if status.allocation.is_some() && claim.spec.allocation_mode.as_deref() != Some("Immediate")
        {
            status.deallocation_requested = Some(true);
        }
    }
    true
}

impl ClaimController {
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
            owned: OwnedClaims::new(),
            created: Mutex::new(HashMap::new()),
            pod_queue: WorkQueue::new(ACTOR_BACKOFF),
            claim_queue: WorkQueue::new(ACTOR_BACKOFF),
        }
    }

    /// Routes a pod change: the pod itself (template claims) and the claims it uses (reservations).
    pub fn on_pod(&self, change: &Change<'_, Pod>) {
        match change {
            Change::Applied(pod) => {
                if pod.metadata.deletion_timestamp.is_none()
                    && !is_pod_done(pod)
                    && !missing_template_claims(pod).is_empty()
                {
                    self.pod_queue.add(&ObjectKey::of(&pod.metadata));
                }
                self.queue_claims_of(pod);
            }
            Change::Deleted(pod) => {
                if let Some(uid) = &pod.metadata.uid {
                    self.created
                        .lock_or_recover()
                        .retain(|(pod, _), _| pod != uid);
                }
                self.queue_claims_of(pod);
            }
            Change::Resynced => {
                for claim in self.claims.state() {
                    self.claim_queue.add(&ObjectKey::of(&claim.metadata));
                }
            }
        }
    }

    fn queue_claims_of(&self, pod: &Pod) {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        for name in pod_claim_names(pod) {
            self.claim_queue.add(&ObjectKey::new(&namespace, &name));
        }
    }

    /// Routes a claim change to the claim queue.
    pub fn on_claim(&self, change: &Change<'_, ResourceClaim>) {
        match change {
            Change::Applied(claim) => {
                self.owned.applied(&claim.metadata);
                self.claim_queue.add(&ObjectKey::of(&claim.metadata));
            }
            Change::Deleted(claim) => self.owned.deleted(&claim.metadata),
            Change::Resynced => {
                let claims = self.claims.state();
                self.owned.reset(claims.iter().map(|c| &c.metadata));
            }
        }
    }

    /// Creates the missing template claims of a pod and records them in the pod status. Decides
    /// on the cached pod, as upstream does: a cache that predates this controller's own status
    /// write finds the claims it created (store or mutation cache) and records them again.
    pub async fn sync_pod(&self, key: ObjectKey) -> Result<Next> {
        let Some(pod) = self
            .pods
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
        else {
            return Ok(Next::Done);
        };
        if pod.metadata.deletion_timestamp.is_some() || is_pod_done(&pod) {
            return Ok(Next::Done);
        }
        let missing = missing_template_claims(&pod);
        if missing.is_empty() {
            return Ok(Next::Done);
        }
        let mut statuses = recorded_statuses(&pod);
        for (pod_claim_name, template_name) in missing {
            let name = self
                .ensure_claim(&pod, &pod_claim_name, &template_name)
                .await?;
            statuses.push(PodResourceClaimStatus {
                name: pod_claim_name,
                resource_claim_name: Some(name),
            });
        }
        let patch = serde_json::json!({ "status": { "resourceClaimStatuses": statuses } });
        let action = format!("record claims of pod {key}");
        let pods = Unread::namespaced::<Pod>(&self.client, &key.namespace);
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        with_retry(&action, || pods.patch_status(&key.name, &params, &patch)).await?;
        Ok(Next::Done)
    }

    /// The name of the claim for `pod_claim_name`, creating it from the template if needed.
    async fn ensure_claim(
        &self,
        pod: &Pod,
        pod_claim_name: &str,
        template_name: &str,
    ) -> Result<String> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        // A claim created before a crash or a failed status write is adopted, not duplicated.
        let existing = self.owned.find(&pod_uid, &self.claims, |claim| {
            let made_for = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION));
            claim.metadata.namespace.as_deref() == Some(namespace.as_str())
                && owning_pod(claim).is_some_and(|(_, uid)| uid == pod_uid)
                && made_for.is_some_and(|n| n == pod_claim_name)
        });
        if let Some(claim) = existing {
            return Ok(claim.metadata.name.clone().unwrap_or_default());
        }
        let made = (pod_uid.clone(), pod_claim_name.to_owned());
        if let Some(name) = self.created.lock_or_recover().get(&made) {
            return Ok(name.clone());
        }
        let cached = self
            .templates
            .get(&ObjectRef::new(template_name).within(&namespace));
        let template = if let Some(template) = cached {
            template
        } else {
            let api: Api<ResourceClaimTemplate> = Api::namespaced(self.client.clone(), &namespace);
            let fetched =
                with_retry("get resourceclaimtemplate", || api.get_opt(template_name)).await?;
            Arc::new(fetched.ok_or_else(|| ActorError::Missing {
                what: format!("resourceclaimtemplate {namespace}/{template_name}"),
            })?)
        };
        let claim = claim_from_template(pod, pod_claim_name, &template);
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let action = format!(
            "create claim {pod_claim_name} for pod {namespace}/{}",
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        let params = PostParams::default();
        let created = with_retry(&action, || api.create(&params, &claim)).await?;
        tracing::debug!(claim.name = ?created.metadata.name, pod = ?pod.metadata.name, "Created claim from template");
        let name = created.metadata.name.unwrap_or_default();
        self.created.lock_or_recover().insert(made, name.clone());
        Ok(name)
    }

    /// Whether the pod with this name and UID still needs its reservations: it exists with that
    /// UID, is not being deleted and is not done. The cache is confirmed with a live read before a
    /// pod is declared gone.
    async fn pod_still_active(&self, namespace: &str, name: &str, uid: &str) -> Result<bool> {
        let active = |pod: &Pod| {
            pod.metadata.uid.as_deref() == Some(uid)
                && pod.metadata.deletion_timestamp.is_none()
                && !is_pod_done(pod)
        };
        if let Some(pod) = self.pods.get(&ObjectRef::new(name).within(namespace)) {
            if active(&pod) {
                return Ok(true);
            }
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let live = with_retry("get pod", || pods.get_opt(name)).await?;
        Ok(live.as_ref().is_some_and(active))
    }

    /// Cleans the reservations of a claim and deletes it once its generated-for pod is done.
    pub async fn sync_claim(&self, key: ObjectKey) -> Result<Next> {
        let Some(claim) = self
            .claims
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
        else {
            return Ok(Next::Done);
        };
        let reserved = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.clone())
            .unwrap_or_default();
        let mut gone = Vec::new();
        for entry in reserved.iter().filter(|r| {
            r.resource == "pods" && r.api_group.as_deref().unwrap_or_default().is_empty()
        }) {
            if !self
                .pod_still_active(&key.namespace, &entry.name, &entry.uid)
                .await?
            {
                gone.push(entry.uid.clone());
            }
        }
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let mut still_reserved = reserved.len() > gone.len();
        if !gone.is_empty() {
            let action = format!("drop reservations of claim {key}");
            let written = read_modify_write(&api, &key.name, Part::Status, &action, |claim| {
                drop_reservations(claim, &gone)
            })
            .await?;
            if let Some(written) = written {
                still_reserved = written
                    .status
                    .and_then(|s| s.reserved_for)
                    .is_some_and(|r| !r.is_empty());
            }
        }
        if still_reserved || claim.metadata.deletion_timestamp.is_some() {
            return Ok(Next::Done);
        }
        let Some((pod_name, pod_uid)) = owning_pod(&claim) else {
            return Ok(Next::Done);
        };
        // Only a pod known to the cache is judged here; a pod that is truly gone is the garbage
        // collector's business.
        let Some(pod) = self
            .pods
            .get(&ObjectRef::new(&pod_name).within(&key.namespace))
        else {
            return Ok(Next::Done);
        };
        if pod.metadata.uid.as_deref() != Some(pod_uid.as_str()) || is_pod_done(&pod) {
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
                    tracing::debug!(claim.name = %key, pod = %pod_name, "Deleted claim of finished pod");
                }
                Err(ActorError::Api { source, .. }) if is_not_found(&source) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(Next::Done)
    }
}

#[cfg(test)]
mod tests;

//! What every simulated kube-scheduler writes besides claims, for the 1.30 (`scheduler`) and
//! the 1.34 (`scheduler_v1`) one alike: its `events.k8s.io/v1` events about a pod, the
//! pod's `PodScheduled` condition and the binding of the pod to a node.
//!
//! I/O only, through `kube::Client`; no decisions.

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};

use super::error::{is_conflict, is_not_found, is_transient, ActorError, Result};
use super::writes::{with_retry, Unread, ATTEMPTS};
use super::ObjectKey;
use super::ACTOR_BACKOFF;

/// The text of the last event a scheduler posted about each pod (by UID), so that a cycle that
/// repeats posts nothing new: a pod that keeps waiting for the same reason, or a pod bound again
/// by a cycle that ran before the informer showed the first binding (the bind then finds the pod
/// bound, as upstream's assumed-pod cache would have kept the cycle from running).
#[derive(Debug, Default)]
pub(crate) struct LastEvents(Mutex<HashMap<String, String>>);

impl LastEvents {
    /// Whether `text` differs from the last text recorded for the pod; records it.
    pub(crate) fn is_new(&self, pod_uid: &str, text: &str) -> bool {
        let mut last = self.0.lock_or_recover();
        if last.get(pod_uid).is_some_and(|t| t == text) {
            return false;
        }
        last.insert(pod_uid.to_owned(), text.to_owned());
        true
    }

    /// Forgets a deleted pod.
    pub(crate) fn forget(&self, pod_uid: &str) {
        self.0.lock_or_recover().remove(pod_uid);
    }
}

/// The scheduler name the simulated schedulers answer to and report as.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// The node a pod is bound to.
pub(crate) fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// Whether a scheduler named [`DEFAULT_SCHEDULER`] is responsible for the pod right now: ours,
/// unbound, alive, not done.
pub fn wants(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let ours = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|n| n == DEFAULT_SCHEDULER);
    let unbound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    ours && unbound
        && pod.metadata.deletion_timestamp.is_none()
        && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Creates one `events.k8s.io/v1` Event about the pod, reported by `default-scheduler`. Each
/// text is an event of its own (a client-side series would keep the first note). Failing to
/// post does not stop scheduling.
pub(crate) async fn post_event(
    client: &Client,
    pod: &Pod,
    type_: &str,
    reason: &str,
    action: &str,
    note: String,
) {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(chrono::Utc::now())),
        type_: Some(type_.into()),
        reason: Some(reason.into()),
        action: Some(action.into()),
        note: Some(note),
        reporting_controller: Some(DEFAULT_SCHEDULER.into()),
        reporting_instance: Some(DEFAULT_SCHEDULER.into()),
        regarding: Some(pod.object_ref(&())),
        ..Event::default()
    };
    let events = Unread::namespaced::<Event>(client, &namespace);
    if let Err(error) = events.create(&PostParams::default(), &event).await {
        tracing::debug!(pod = %name, %error, "Could not post a scheduler event");
    }
}

/// Records why the pod waits in its `PodScheduled` condition (status False, `reason`), as the
/// scheduler does, when the message changed. Failing to record it does not stop scheduling.
pub(crate) async fn record_unschedulable(
    client: &Client,
    key: &ObjectKey,
    pod: &Pod,
    reason: &str,
    message: &str,
) {
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
    if current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    }) {
        return;
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = serde_json::json!({ "status": { "conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }]}});
    let pods = Unread::namespaced::<Pod>(client, &key.namespace);
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let action = format!("record scheduling condition of {key}");
    if let Err(error) = with_retry(&action, || pods.patch_status(&key.name, &params, &patch)).await
    {
        tracing::debug!(pod = %key, %error, "Could not record why the pod waits");
    }
}

/// Binds the pod to `node` through `pods/binding`, retrying transient failures. `Ok(false)`
/// when the pod is gone; a conflict whose live pod already has a node counts as bound (an
/// earlier attempt may have succeeded with its answer lost).
pub(crate) async fn bind(client: &Client, key: &ObjectKey, node: &str) -> Result<bool> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(key.name.clone()),
            namespace: Some(key.namespace.clone()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    };
    let body = serde_json::to_vec(&binding).map_err(|source| ActorError::Encode {
        what: "binding",
        source,
    })?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &key.namespace);
    let bindings = Unread::namespaced::<Pod>(client, &key.namespace);
    let action = format!("bind pod {key} to {node}");
    let post = PostParams::default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let bound = bindings
            .create_subresource("binding", &key.name, &post, body.clone())
            .await;
        match bound {
            Ok(()) => return Ok(true),
            Err(error) if is_not_found(&error) => return Ok(false),
            Err(error) if is_conflict(&error) => {
                let live = with_retry(&action, || pods.get_opt(&key.name)).await?;
                let node_name = live
                    .as_ref()
                    .and_then(|p| p.spec.as_ref()?.node_name.clone());
                if live.is_none() {
                    return Ok(false);
                }
                if node_name.is_some() {
                    return Ok(true);
                }
                if attempt >= ATTEMPTS {
                    return Err(ActorError::api(action, error));
                }
            }
            Err(error) if is_transient(&error) && attempt < ATTEMPTS => {}
            Err(error) => return Err(ActorError::api(action, error)),
        }
        tokio::time::sleep(ACTOR_BACKOFF.backoff(attempt)).await;
    }
}

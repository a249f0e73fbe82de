//! A minimal kubelet for every node: a bound pod becomes Running (with its start time and ready
//! conditions); a pod annotated `sim.dra-ledger.io/run-seconds` becomes Succeeded that long after
//! it started; a bound pod being deleted gracefully is removed for good. On a node with a kubelet
//! directory the pod's claims are first prepared by the node's DRA plugins (the pod stays Pending
//! until they are), and unprepared once it has ended or is being deleted, before it is removed
//! (see [`super::plugins`]). From 1.36 a running pod's container statuses show the health of
//! the devices of its claims, written again when a plugin reports a change.
//!
//! Talks to the API server only through `kube::Client`; the phase decision is pure (`step`).

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;

use super::claims::is_pod_done;
use super::error::{is_not_found, ActorError, Result};
use super::plugins::prepare::Prepare;
use super::plugins::{NodePlugins, Plugins};
use super::writes::{with_retry, Unread};
use super::ObjectKey;
use crate::actors::ACTOR_BACKOFF;
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};

/// Annotation with the number of seconds (fractions allowed) a pod runs before it succeeds.
pub const RUN_SECONDS_ANNOTATION: &str = "sim.dra-ledger.io/run-seconds";

/// What the kubelet does with a pod now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// Not bound, or already finished: nothing.
    Nothing,
    /// Bound and not started: mark it Running; finish after the given run time, if any.
    Start(Option<Duration>),
    /// Running, but not long enough yet: look again after this delay.
    Wait(Duration),
    /// Its run time is over: mark it Succeeded.
    Finish,
    /// Being deleted on its node: remove it for good.
    Remove,
}

/// The run time the annotation asks for; `None` when absent or not a non-negative number.
pub(crate) fn run_time(pod: &Pod) -> Option<Duration> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()?
        .get(RUN_SECONDS_ANNOTATION)?;
    let seconds: f64 = raw.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// The kubelet's decision for `pod` at time `now`. `started` is when this kubelet started the
/// pod, if it remembers; otherwise `status.startTime` (whole seconds only) is used.
pub(crate) fn step(pod: &Pod, now: DateTime<Utc>, started: Option<DateTime<Utc>>) -> Step {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !bound {
        return Step::Nothing;
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Step::Remove;
    }
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded" | "Failed") => Step::Nothing,
        Some("Running") => {
            let Some(run) = run_time(pod) else {
                return Step::Nothing;
            };
            let started = started
                .or_else(|| status.and_then(|s| s.start_time.as_ref()).map(|t| t.0))
                .unwrap_or(now);
            let elapsed = (now - started).to_std().unwrap_or_default();
            if elapsed >= run {
                Step::Finish
            } else {
                Step::Wait(run.saturating_sub(elapsed))
            }
        }
        _ => Step::Start(run_time(pod)),
    }
}

fn conditions(ready: bool, now: &str) -> serde_json::Value {
    let ready = if ready { "True" } else { "False" };
    serde_json::json!([
        { "type": "PodScheduled", "status": "True", "lastTransitionTime": now },
        { "type": "Initialized", "status": "True", "lastTransitionTime": now },
        { "type": "ContainersReady", "status": ready, "lastTransitionTime": now },
        { "type": "Ready", "status": ready, "lastTransitionTime": now },
    ])
}

/// The kubelet actor.
pub(crate) struct Kubelet {
    client: Client,
    pods: Store<Pod>,
    /// Precise start times of the pods this kubelet started, by UID.
    started: Mutex<HashMap<String, DateTime<Utc>>>,
    /// The DRA plugins of the nodes with a kubelet directory.
    plugins: Arc<Plugins>,
    /// Pods whose state on their node may have to change.
    pub queue: WorkQueue<ObjectKey>,
    /// Whether the nodes run this kubelet at all; without, no pod is ever queued.
    enabled: bool,
}

/// Unprepares on `node` the claims of the pod of `key` with `uid`.
async fn unprepare(node: &NodePlugins, key: &ObjectKey, uid: &str) -> Result<()> {
    node.unprepare_pod(uid)
        .await
        .map_err(|source| ActorError::Unprepare {
            pod: key.to_string(),
            source,
        })
}

/// The claims of `pod` on a node with plugins, at `step`: unprepared once the pod has ended or is
/// being removed, prepared before it starts. `Some` is the wait before the pod is looked at again
/// because its claims are not prepared yet.
async fn drive_claims(
    node: &NodePlugins,
    pod: &Pod,
    key: &ObjectKey,
    step: Step,
) -> Result<Option<Duration>> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let done = match step {
        Step::Remove => true,
        Step::Nothing => is_pod_done(pod),
        _ => false,
    };
    if done && node.holds(uid) {
        unprepare(node, key, uid).await?;
    }
    if let Step::Start(_) = step {
        match node.prepare_pod(pod).await {
            Prepare::Ready => {}
            Prepare::Waiting(reason, wait) => {
                tracing::debug!(pod = %key, %reason, "Claims not ready for the pod yet");
                return Ok(Some(wait));
            }
            Prepare::Failed(reason, wait) => {
                tracing::debug!(pod = %key, %reason, ?wait, "Preparing the pod's claims failed");
                return Ok(Some(wait));
            }
        }
    }
    Ok(None)
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

impl Kubelet {
    /// A kubelet reading the pod store, preparing claims through `plugins` on their nodes.
    /// When not `enabled` it ignores every pod: bound pods stay Pending, as on nodes without a
    /// kubelet (the fake nodes of the upstream `scheduler_perf` harness).
    pub(crate) fn new(
        client: Client,
        pods: Store<Pod>,
        plugins: Arc<Plugins>,
        enabled: bool,
    ) -> Self {
        Self {
            client,
            pods,
            started: Mutex::new(HashMap::new()),
            plugins,
            queue: WorkQueue::new(ACTOR_BACKOFF),
            enabled,
        }
    }

    /// The plugins of the pod's node, if it has a kubelet directory.
    fn plugins_of(&self, pod: &Pod) -> Option<Arc<NodePlugins>> {
        self.plugins.node(node_of(pod)?).cloned()
    }

    /// Whether the pod's node still holds claims for the pod.
    fn holds_claims(&self, pod: &Pod) -> bool {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        self.plugins_of(pod).is_some_and(|node| node.holds(uid))
    }

    /// Queues every pod holding claims whenever a device's health changes on some node, so that
    /// the running ones show it; ends with the plugins.
    pub(crate) async fn follow_health(self: Arc<Self>) {
        let mut updates = self.plugins.health_updates();
        while updates.changed().await.is_ok() {
            for key in self.plugins.tracked_keys() {
                self.queue.add(&key);
            }
        }
    }

    /// Queues a changed pod that is bound to a node.
    pub(crate) fn on_pod(&self, change: &Change<'_, Pod>) {
        if !self.enabled {
            return;
        }
        match change {
            Change::Applied(pod) => {
                if step(pod, Utc::now(), None) != Step::Nothing || self.holds_claims(pod) {
                    self.queue.add(&ObjectKey::of(&pod.metadata));
                }
            }
            Change::Deleted(pod) => {
                if let Some(uid) = &pod.metadata.uid {
                    self.started.lock_or_recover().remove(uid);
                }
                let key = ObjectKey::of(&pod.metadata);
                if !self.plugins.tracked(&key).is_empty() {
                    self.queue.add(&key);
                }
            }
            Change::Resynced => {
                for key in self.plugins.tracked_keys() {
                    self.queue.add(&key);
                }
            }
        }
    }

    /// Unprepares the claims of pods of `key` that are gone or were replaced by a pod of the same
    /// name (`current` is the UID of the pod there now).
    async fn release_departed(&self, key: &ObjectKey, current: Option<&str>) -> Result<()> {
        for (node, uid) in self.plugins.tracked(key) {
            if Some(uid.as_str()) != current {
                unprepare(&node, key, &uid).await?;
            }
        }
        Ok(())
    }

    /// Moves the pod one step along its life on the node.
    pub(crate) async fn sync(&self, key: ObjectKey) -> Result<Next> {
        let pod = self
            .pods
            .get(&ObjectRef::new(&key.name).within(&key.namespace));
        let current = pod.as_ref().and_then(|p| p.metadata.uid.as_deref());
        self.release_departed(&key, current).await?;
        let Some(pod) = pod else {
            return Ok(Next::Done);
        };
        let now = Utc::now();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let started = self.started.lock_or_recover().get(&uid).copied();
        let step = step(&pod, now, started);
        let plugins = self.plugins_of(&pod);
        if let Some(node) = &plugins {
            if let Some(wait) = drive_claims(node, &pod, &key, step).await? {
                return Ok(Next::After(wait));
            }
        }
        if let (Some(node), Step::Nothing) = (&plugins, step) {
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            if running && node.holds(&uid) {
                if let Err(error) = node.sync_health(&pod).await {
                    tracing::debug!(pod = %key, %error, "Failed to write the pod's device health");
                }
            }
        }
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (patch, next) = match step {
            Step::Nothing => return Ok(Next::Done),
            Step::Wait(delay) => return Ok(Next::After(delay)),
            Step::Remove => return self.remove(&key).await,
            Step::Start(run) => {
                self.started.lock_or_recover().insert(uid.clone(), now);
                let host_ip = "10.0.0.1";
                let patch = serde_json::json!({ "status": {
                    "phase": "Running",
                    "startTime": stamp,
                    "hostIP": host_ip,
                    "conditions": conditions(true, &stamp),
                }});
                (patch, run.map_or(Next::Done, Next::After))
            }
            Step::Finish => {
                self.started.lock_or_recover().remove(&uid);
                let patch = serde_json::json!({ "status": {
                    "phase": "Succeeded",
                    "conditions": conditions(false, &stamp),
                }});
                (patch, Next::Done)
            }
        };
        let api = Unread::namespaced::<Pod>(&self.client, &key.namespace);
        let action = format!("update status of pod {key}");
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        match with_retry(&action, || api.patch_status(&key.name, &params, &patch)).await {
            Ok(()) if step == Step::Finish && plugins.is_some() => {
                // Ended: its claims are unprepared by the next sync, which sees it Succeeded.
                Ok(Next::After(std::time::Duration::ZERO))
            }
            Ok(()) => Ok(next),
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(Next::Done),
            Err(error) => Err(error),
        }
    }

    /// Removes the pod of `key` for good (no grace period); a pod already gone is done.
    async fn remove(&self, key: &ObjectKey) -> Result<Next> {
        let api = Unread::namespaced::<Pod>(&self.client, &key.namespace);
        let action = format!("remove pod {key}");
        let params = DeleteParams::default().grace_period(0);
        match with_retry(&action, || api.delete(&key.name, &params)).await {
            Ok(()) => Ok(Next::Done),
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(Next::Done),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn pod(
        node: Option<&str>,
        phase: Option<&str>,
        run: Option<&str>,
        started: Option<DateTime<Utc>>,
    ) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                annotations: run
                    .map(|r| [(RUN_SECONDS_ANNOTATION.to_owned(), r.to_owned())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: phase.map(Into::into),
                start_time: started.map(Time),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn unbound_pod_is_left_alone() {
        assert_eq!(
            step(&pod(None, Some("Pending"), None, None), Utc::now(), None),
            Step::Nothing
        );
    }

    #[test]
    fn bound_pending_pod_starts_with_its_run_time() {
        let now = Utc::now();
        assert_eq!(
            step(&pod(Some("n"), None, None, None), now, None),
            Step::Start(None)
        );
        assert_eq!(
            step(
                &pod(Some("n"), Some("Pending"), Some("1.5"), None),
                now,
                None
            ),
            Step::Start(Some(Duration::from_millis(1500)))
        );
    }

    #[test]
    fn running_pod_finishes_once_its_run_time_is_over() {
        let now = Utc::now();
        let started = now - chrono::Duration::seconds(3);
        assert_eq!(
            step(
                &pod(Some("n"), Some("Running"), Some("2"), Some(started)),
                now,
                None
            ),
            Step::Finish
        );
        assert_eq!(
            step(
                &pod(Some("n"), Some("Running"), Some("5"), Some(started)),
                now,
                None
            ),
            Step::Wait(Duration::from_secs(2))
        );
        assert_eq!(
            step(
                &pod(Some("n"), Some("Running"), None, Some(started)),
                now,
                None
            ),
            Step::Nothing
        );
    }

    #[test]
    fn remembered_start_time_beats_the_whole_second_status_time() {
        let now = Utc::now();
        let status_time = now - chrono::Duration::seconds(2);
        let precise = now - chrono::Duration::milliseconds(500);
        assert_eq!(
            step(
                &pod(Some("n"), Some("Running"), Some("1"), Some(status_time)),
                now,
                Some(precise)
            ),
            Step::Wait(Duration::from_millis(500))
        );
    }

    #[test]
    fn malformed_run_time_means_run_forever() {
        let now = Utc::now();
        assert_eq!(
            step(&pod(Some("n"), None, Some("soon"), None), now, None),
            Step::Start(None)
        );
        assert_eq!(
            step(&pod(Some("n"), None, Some("-1"), None), now, None),
            Step::Start(None)
        );
    }

    #[test]
    fn finished_pod_stays_finished() {
        assert_eq!(
            step(
                &pod(Some("n"), Some("Succeeded"), Some("0"), None),
                Utc::now(),
                None
            ),
            Step::Nothing
        );
    }
}

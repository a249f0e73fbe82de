//! Prepare and unprepare as the 1.30 kubelet drives them: before a pod on the node runs, its
//! claims are read from the API server, checked and referenced in the node's claim cache, and the
//! unprepared ones are sent in one `NodePrepareResources` call per driver; after the pod has
//! ended, the claims it was the last to use go in one `NodeUnprepareResources` call per driver. A
//! failed prepare is reported as a `FailedPrepareDynamicResources` Warning event on the pod.
//!
//! I/O only; which claims go into which call is decided by the claims module.

use dra_runtime::lock::LockExt;
use std::collections::BTreeSet;
use std::time::Duration;

use dra_types::kubelet::v1alpha3::{self, node_client::NodeClient};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::Api;
use tonic::Status;

use super::calls::{asked, claim_errors, send_call, Call};
use super::claims::{
    pod_claims, prepared_claim_info, uids, Batches, ClaimCache, ClaimCall, ClaimInfo,
};
use super::error::{CallError, ClaimError};
use super::{backoff, NodePlugins};
use crate::actors::events::{post_pod_warning, Reporter};
use crate::actors::ObjectKey;

/// The event reason of a failed prepare (kubelet's `events.FailedPrepareDynamicResources`).
pub(crate) const FAILED_PREPARE_REASON: &str = "FailedPrepareDynamicResources";

/// Where a pod's prepare stands.
#[derive(Debug)]
pub(crate) enum Prepare {
    /// Every claim of the pod is prepared: it may run.
    Ready,
    /// A claim is not resolvable, allocated or reserved for the pod yet: look again after the wait.
    Waiting(ClaimError, Duration),
    /// A prepare call failed (the event is posted): try again after the wait.
    Failed(String, Duration),
}

impl NodePlugins {
    /// Prepares the claims of `pod` that are not prepared yet, as the node's release does.
    pub(crate) async fn prepare_pod(&self, pod: &Pod) -> Prepare {
        if self.version.serves_v1() {
            return self.prepare_v1(pod).await;
        }
        let waiting = |reason: ClaimError| Prepare::Waiting(reason, self.config.claim_poll);
        let claims = match pod_claims(pod) {
            Ok(claims) => claims,
            Err(reason) => return waiting(reason),
        };
        if claims.is_empty() {
            return Prepare::Ready;
        }
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let mut infos = Vec::new();
        for pod_claim in &claims {
            let claim = match api.get_opt(&pod_claim.name).await {
                Ok(Some(claim)) => claim,
                Ok(None) => {
                    return waiting(ClaimError::NotFound {
                        namespace,
                        name: pod_claim.name.clone(),
                    })
                }
                Err(source) => {
                    return waiting(ClaimError::Get {
                        name: pod_claim.name.clone(),
                        source: Box::new(source),
                    })
                }
            };
            match prepared_claim_info(pod, pod_claim, &claim) {
                Ok(info) => infos.push(info),
                Err(reason) => return waiting(reason),
            }
        }
        let claim_uids: Vec<String> = infos.iter().map(|i| i.uid.clone()).collect();
        let Ok(batches) =
            self.reference_claims(pod, infos, |_, _| Ok::<_, std::convert::Infallible>(()));
        let mut result = Ok(());
        for (driver, calls) in &batches {
            result = self.call_driver(Call::Prepare, driver, calls).await;
            if result.is_err() {
                break;
            }
        }
        let ready = self
            .claims
            .lock_or_recover()
            .all_prepared(claim_uids.iter().map(String::as_str));
        match result {
            Ok(()) if ready => {
                self.failures.lock_or_recover().remove(&pod_uid);
                Prepare::Ready
            }
            Ok(()) => Prepare::Failed(
                "some claims were not prepared".into(),
                self.note_failure(&pod_uid),
            ),
            Err(error) => {
                let message = format!("Failed to prepare dynamic resources: {error}");
                self.post_warning(pod, &message).await;
                Prepare::Failed(message, self.note_failure(&pod_uid))
            }
        }
    }

    /// References `infos` for `pod` in the claim cache, after `check` accepted each of them
    /// against it, and tracks the pod; returns the calls that prepare what is not prepared yet.
    pub(super) fn reference_claims<E>(
        &self,
        pod: &Pod,
        infos: Vec<ClaimInfo>,
        check: impl Fn(&ClaimCache, &ClaimInfo) -> Result<(), E>,
    ) -> Result<Batches, E> {
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let batches = {
            let mut cache = self.claims.lock_or_recover();
            for info in &infos {
                check(&cache, info)?;
            }
            for info in infos {
                cache.reference(&pod_uid, info);
            }
            cache.prepare_batches(&pod_uid)
        };
        self.pods
            .lock_or_recover()
            .insert(pod_uid, ObjectKey::of(&pod.metadata));
        Ok(batches)
    }

    /// Counts a failed prepare of the pod; returns the wait before the next attempt.
    pub(super) fn note_failure(&self, pod_uid: &str) -> Duration {
        let mut failures = self.failures.lock_or_recover();
        let count = failures.entry(pod_uid.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        backoff(
            self.config.prepare_retry,
            self.config.prepare_retry_max,
            *count,
        )
    }

    /// One `call` with `driver`'s batch of claims, checked as the 1.30 DRA manager checks the
    /// answer. A prepare marks the claims it prepared in the cache even when another claim of the
    /// call failed (nothing is rolled back, as in 1.30).
    async fn call_v1alpha2(
        &self,
        call: Call,
        driver: &str,
        calls: &[ClaimCall],
    ) -> Result<(), CallError> {
        let client = NodeClient::new(self.channel(driver)?);
        let claims: Vec<v1alpha3::Claim> = calls.iter().map(claim).collect();
        let answer = async { Ok::<_, Status>(send_call!(v1alpha3, client, call, claims)) };
        let answer = tokio::time::timeout(self.config.call_timeout, answer)
            .await
            .map_err(|_| CallError::Deadline { call })?
            .map_err(|status| CallError::Status { call, status })?;
        for (uid, error) in &answer {
            let asked = asked(call, calls, uid)?;
            if !error.is_empty() {
                return Err(CallError::ClaimFailed {
                    call,
                    namespace: asked.namespace.clone(),
                    name: asked.name.clone(),
                    error: error.clone(),
                });
            }
            if call == Call::Prepare {
                self.claims.lock_or_recover().mark_prepared(uid, driver);
            }
        }
        let requested: BTreeSet<&str> = calls.iter().map(|c| c.uid.as_str()).collect();
        let count = requested
            .into_iter()
            .filter(|uid| !answer.contains_key(*uid))
            .count();
        if count > 0 {
            return Err(CallError::LeftOut { call, count });
        }
        Ok(())
    }

    /// Unprepares the claims `pod_uid` was the last pod to use and drops its references.
    pub(crate) async fn unprepare_pod(&self, pod_uid: &str) -> Result<(), CallError> {
        let batches: Batches = self.claims.lock_or_recover().unprepare_batches(pod_uid);
        for (driver, calls) in &batches {
            self.call_driver(Call::Unprepare, driver, calls).await?;
        }
        let unprepared = uids(&batches);
        self.claims.lock_or_recover().release(pod_uid, &unprepared);
        self.pods.lock_or_recover().remove(pod_uid);
        self.failures.lock_or_recover().remove(pod_uid);
        self.health_written.lock_or_recover().remove(pod_uid);
        if !unprepared.is_empty() {
            tracing::debug!(node = %self.node, pod = pod_uid, claims = unprepared.len(), "Unprepared the claims of a pod");
        }
        Ok(())
    }

    /// One `call` with `driver`'s batch, as the node's release makes it.
    pub(super) async fn call_driver(
        &self,
        call: Call,
        driver: &str,
        claims: &[ClaimCall],
    ) -> Result<(), CallError> {
        if self.version.serves_v1() {
            self.call_v1(call, driver, claims).await
        } else {
            self.call_v1alpha2(call, driver, claims).await
        }
    }

    /// Posts a core/v1 Warning event on `pod` from the kubelet of this node; a failed post is
    /// only logged.
    pub(super) async fn post_warning(&self, pod: &Pod, message: &str) {
        let reporter = Reporter {
            component: "kubelet",
            host: Some(&self.node),
        };
        post_pod_warning(&self.client, pod, reporter, FAILED_PREPARE_REASON, message).await;
    }
}

fn claim(call: &ClaimCall) -> v1alpha3::Claim {
    v1alpha3::Claim {
        namespace: call.namespace.clone(),
        uid: call.uid.clone(),
        name: call.name.clone(),
        resource_handle: call.resource_handle.clone(),
        structured_resource_handle: Vec::new(),
    }
}

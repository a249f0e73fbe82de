//! The writes of the claim the scheduler makes for a pod's extended resources, as upstream's
//! `PreBind` and `Unreserve` do them (`createExtendedResourceClaimInAPI`,
//! `patchPodExtendedResourceClaimStatus`, `unreserveExtendedResourceClaim`): the claim is created
//! (its allocation then written like any claim's), the pod's `status.extendedResourceClaimStatus`
//! names it before the bind, and a bind that fails deletes it again.
//!
//! I/O only; what the claim holds is decided by [`super::extended`].

use dra_runtime::lock::LockExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;

use super::extended::{self, ExtendedClaim};
use super::in_use::holdings;
use super::plan::ClaimWrite;
use super::SchedulerV1;
use crate::actors::error::{ActorError, Result};
use crate::actors::writes::{read_modify_write, with_retry, Part};
use crate::actors::ObjectKey;
use dra_types::resource_v1::{AllocationResult, ResourceClaim, DELETE_PROTECTION_FINALIZER};

impl SchedulerV1 {
    /// Creates the claim of `pod`'s extended resources; the write of `allocation` that
    /// follows, with the claim's name and UID. The devices held in flight under the pod's UID
    /// move to the claim's.
    pub(super) async fn create_extended(
        &self,
        pod: &Pod,
        claim: &ExtendedClaim,
        allocation: AllocationResult,
    ) -> Result<ClaimWrite> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let object: ResourceClaim = serde_json::from_value(extended::claim_object(pod, claim))
            .map_err(|source| ActorError::Encode {
                what: "extended resource claim",
                source,
            })?;
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let action = format!("create claim for extended resources of pod {namespace}/{pod_name}");
        let params = PostParams::default();
        let created = with_retry(&action, || api.create(&params, &object)).await?;
        let uid = created.metadata.uid.clone().unwrap_or_default();
        let devices = holdings(&allocation.devices.results);
        let mut in_flight = self.in_flight.lock_or_recover();
        in_flight.claims.insert(&uid, devices);
        in_flight
            .claims
            .remove(pod.metadata.uid.as_deref().unwrap_or_default());
        Ok(ClaimWrite {
            name: created.metadata.name.unwrap_or_default(),
            uid,
            allocation: Some(allocation),
        })
    }

    /// Records the created claim in the pod's `status.extendedResourceClaimStatus`.
    pub(super) async fn record_extended(
        &self,
        key: &ObjectKey,
        write: &ClaimWrite,
        claim: &ExtendedClaim,
    ) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let patch = extended::status_patch(&write.name, &claim.mappings);
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let action = format!("update pod {key} ExtendedResourceClaimStatus");
        with_retry(&action, || pods.patch_status(&key.name, &params, &patch)).await?;
        Ok(())
    }

    /// `Unreserve` of a claim written to the API server: drops the delete-protection finalizer,
    /// then deletes it, so that a failed bind leaves nothing behind.
    pub(super) async fn delete_extended(&self, key: &ObjectKey, write: &ClaimWrite) {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        let action = format!("release claim {}/{}", key.namespace, write.name);
        let released = read_modify_write(&api, &write.name, Part::Main, &action, |claim| {
            let finalizers = claim.metadata.finalizers.get_or_insert_with(Vec::new);
            let before = finalizers.len();
            finalizers.retain(|f| f != DELETE_PROTECTION_FINALIZER);
            finalizers.len() != before
        })
        .await;
        let action = format!("delete claim {}/{}", key.namespace, write.name);
        let params = DeleteParams::default();
        let deleted = with_retry(&action, || api.delete(&write.name, &params));
        if let Err(error) = released.and(deleted.await.map(drop)) {
            tracing::debug!(pod = %key, claim = %write.name, %error, "Could not delete the extended-resource claim");
        }
    }

    /// Forgets a bind that did not start (the pod's in-flight devices and node).
    pub(super) fn forget_bind(&self, pod_uid: &str) {
        let mut in_flight = self.in_flight.lock_or_recover();
        in_flight.binds.remove(pod_uid);
        in_flight.claims.remove(pod_uid);
    }
}

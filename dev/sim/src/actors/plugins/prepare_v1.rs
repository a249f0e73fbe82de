//! Prepare and unprepare as the 1.34 kubelet drives them: before a pod on the node runs, each
//! of its claims is resolved (template claims through `status.resourceClaimStatuses`, the claim
//! the scheduler made for extended resources through `status.extendedResourceClaimStatus`), read from
//! the API server and checked ([`super::checks`]) without touching the claim cache; then the
//! claims are referenced and the unprepared ones sent in one `NodePrepareResources` per driver
//! over the driver's service; they count as prepared once every call succeeded. Any failure is a
//! `FailedPrepareDynamicResources` event (`Failed to prepare dynamic resources: prepare dynamic
//! resources: ...`) and a retry. After the pod's containers stopped, the claims it was the last
//! to reference go in one `NodeUnprepareResources` per driver.
//!
//! I/O only; the checks and the batches are decided by the checks and claims modules.

use dra_runtime::lock::LockExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::Api;

use super::calls::{self, Call};
use super::checks::{claim_info, same_claim};
use super::claims::ClaimCall;
use super::error::{CallError, ClaimError, PrepareError};
use super::prepare::Prepare;
use super::NodePlugins;
use crate::actors::claim_refs::{claim_name, pod_claim_entries, ClaimName};
use crate::actors::scheduler_v1::extended::is_dra_name;
use dra_types::resource_v1::ResourceClaim;

impl NodePlugins {
    /// Prepares the claims of `pod` that are not prepared yet (1.34).
    pub(super) async fn prepare_v1(&self, pod: &Pod) -> Prepare {
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        match self.try_prepare(pod).await {
            Ok(()) => {
                self.failures.lock_or_recover().remove(&pod_uid);
                Prepare::Ready
            }
            Err(error) => {
                let message = format!(
                    "Failed to prepare dynamic resources: prepare dynamic resources: {error}"
                );
                self.post_warning(pod, &message).await;
                Prepare::Failed(message, self.note_failure(&pod_uid))
            }
        }
    }

    async fn try_prepare(&self, pod: &Pod) -> Result<(), PrepareError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &namespace);
        let mut names = Vec::new();
        for entry in pod_claim_entries(pod) {
            if let Some(name) = claim_name(pod, entry).map_err(ClaimError::Name)? {
                names.push(name);
            }
        }
        names.extend(self.extended_resource_claim(pod).await?);
        let mut infos = Vec::new();
        for name in names {
            let claim = api
                .get(&name.name)
                .await
                .map_err(|source| ClaimError::Fetch {
                    name: name.name.clone(),
                    source: Box::new(source),
                })?;
            let registered = |driver: &str| self.has_instance(driver);
            infos.push(claim_info(pod, &name, &claim, &registered)?);
        }
        if infos.is_empty() {
            return Ok(());
        }
        let claim_uids: Vec<String> = infos.iter().map(|i| i.uid.clone()).collect();
        let batches = self.reference_claims(pod, infos, same_claim)?;
        for (driver, calls) in &batches {
            self.call_driver(Call::Prepare, driver, calls).await?;
        }
        let mut cache = self.claims.lock_or_recover();
        for (driver, calls) in &batches {
            for claim in calls {
                cache.mark_prepared(&claim.uid, driver);
            }
        }
        if cache.all_prepared(claim_uids.iter().map(String::as_str)) {
            Ok(())
        } else {
            Err(PrepareError::NotAllPrepared)
        }
    }

    /// The claim the scheduler made for the pod's extended resources, as the pod's
    /// `status.extendedResourceClaimStatus` names it (1.36+): a claim of the pod like the others,
    /// without the owner check of template claims. Read live, and only for a pod whose
    /// containers ask for such a resource (the typed pod of the informer lacks the field).
    async fn extended_resource_claim(&self, pod: &Pod) -> Result<Option<ClaimName>, PrepareError> {
        let asks = pod.spec.iter().flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        });
        let asks = asks
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref())
            .any(|r| r.keys().any(|k| is_dra_name(k)));
        if !asks {
            return Ok(None);
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pods: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &ApiResource::erase::<Pod>(&()),
        );
        let live = pods
            .get(&name)
            .await
            .map_err(|source| ClaimError::FetchPod {
                name: name.clone(),
                source: Box::new(source),
            })?;
        let claim = live.data["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
            .as_str()
            .map(|name| ClaimName {
                name: name.to_owned(),
                check_owner: false,
            });
        Ok(claim)
    }

    /// One `call` with `driver`'s batch over the service its most recent instance registered
    /// (1.34); the devices a prepare answers are kept for the claims' health.
    pub(super) async fn call_v1(
        &self,
        call: Call,
        driver: &str,
        claims: &[ClaimCall],
    ) -> Result<(), CallError> {
        let (channel, service) = self.instance(driver)?;
        let devices = calls::call(channel, service, call, claims, self.config.call_timeout).await?;
        let mut prepared = self.prepared_devices.lock_or_recover();
        for (uid, devices) in devices {
            if call == Call::Prepare {
                prepared.insert((uid, driver.to_owned()), devices);
            }
        }
        if call == Call::Unprepare {
            prepared.retain(|(uid, d), _| d != driver || !claims.iter().any(|c| c.uid == *uid));
        }
        Ok(())
    }
}

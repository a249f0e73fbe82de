//! The writes of the device-taint eviction controller: the eviction of a pod (event, pod
//! condition, delete with a UID precondition), the cancellation event, and a rule's
//! `EvictionInProgress` condition through its status subresource.
//!
//! I/O only; the decisions are the caller's (`plan`).

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;

use super::plan::{RuleCondition, EVICTION_IN_PROGRESS};
use super::COMPONENT;
use crate::actors::device_taints::rules::RuleVersion;
use crate::actors::error::{is_not_found, ActorError, Result};
use crate::actors::events::{post_pod_event, Reporter};
use crate::actors::writes::with_retry;
use crate::actors::ObjectKey;
use dra_runtime::workqueue::Next;
use dra_types::resource_v1::{DeviceTaintRule, GROUP};

/// The event reason of both the eviction and its cancellation.
pub const EVENT_REASON: &str = "DeviceTaintManagerEviction";
/// The pod condition's reason.
pub const CONDITION_REASON: &str = "DeletionByDeviceTaintManager";
/// The pod condition's message.
pub const CONDITION_MESSAGE: &str = "Device Taint manager: deleting due to NoExecute taint";

const REPORTER: Reporter<'static> = Reporter {
    component: COMPONENT,
    host: None,
};

/// Evicts `pod` (`addConditionAndDeletePod`): reads it live, and unless it is gone, replaced
/// or already being deleted, posts `Marking for deletion`, adds `DisruptionTarget` and deletes
/// it with its UID as precondition. `true` when this call deleted it.
pub(super) async fn evict(client: &Client, key: &ObjectKey, pod: &Pod) -> Result<bool> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &key.namespace);
    let action = format!("evict pod {key}");
    let live = with_retry(&action, || api.get_opt(&key.name)).await?;
    let Some(live) = live.filter(|l| l.metadata.uid == pod.metadata.uid) else {
        return Ok(false);
    };
    if live.metadata.deletion_timestamp.is_some() {
        return Ok(false);
    }
    post_pod_event(
        client,
        &live,
        REPORTER,
        "Normal",
        EVENT_REASON,
        "Marking for deletion",
    )
    .await;
    let marked = live
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some(CONDITION_REASON)
            })
        });
    if !marked {
        let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": CONDITION_REASON,
            "message": CONDITION_MESSAGE, "lastTransitionTime": now,
        }]}});
        let (params, patch) = (PatchParams::default(), Patch::Strategic(&patch));
        match with_retry(&action, || api.patch_status(&key.name, &params, &patch)).await {
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => return Ok(false),
            other => drop(other?),
        }
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: live.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match with_retry(&action, || api.delete(&key.name, &params)).await {
        Ok(_) => Ok(true),
        Err(ActorError::Api { source, .. })
            if is_not_found(&source) || crate::actors::error::status_code(&source) == Some(409) =>
        {
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

/// Posts `Cancelling deletion` on `pod`.
pub(super) async fn cancelled(client: &Client, pod: &Pod) {
    post_pod_event(
        client,
        pod,
        REPORTER,
        "Normal",
        EVENT_REASON,
        "Cancelling deletion",
    )
    .await;
}

fn rule_resource(version: RuleVersion) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.name().into(),
        api_version: format!("{GROUP}/{}", version.name()),
        kind: "DeviceTaintRule".into(),
        plural: "devicetaintrules".into(),
    }
}

/// Writes `condition` into the rule's status when it differs from the stored one, unless the
/// stored one is of the same generation and younger than `period` (then looks again when it is
/// not).
pub(super) async fn write_rule_condition(
    client: &Client,
    version: RuleVersion,
    rule: &DeviceTaintRule,
    condition: &RuleCondition,
    period: Duration,
) -> Result<Next> {
    let generation = rule.metadata.generation.unwrap_or_default();
    let existing = rule.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == EVICTION_IN_PROGRESS)
    });
    if let Some(existing) = existing {
        let same = existing.status == condition.status
            && existing.reason == condition.reason
            && existing.message == condition.message
            && existing.observed_generation == Some(generation);
        if same {
            return Ok(Next::Done);
        }
        let since = (Utc::now() - existing.last_transition_time.0)
            .to_std()
            .unwrap_or_default();
        if existing.observed_generation == Some(generation) && since < period {
            return Ok(Next::After(period.saturating_sub(since)));
        }
    }
    let name = rule.metadata.name.clone().unwrap_or_default();
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = json!({"status": {"conditions": [{
        "type": EVICTION_IN_PROGRESS, "status": condition.status, "reason": condition.reason,
        "message": condition.message, "observedGeneration": generation,
        "lastTransitionTime": now,
    }]}});
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &rule_resource(version));
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let action = format!("write the status of devicetaintrule {name}");
    match with_retry(&action, || api.patch_status(&name, &params, &patch)).await {
        Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(Next::Done),
        other => other.map(|_| Next::Done),
    }
}

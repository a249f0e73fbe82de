//! Wiring of a 1.34+ (`v1`) cluster: pods read in the 1.34 shape, the `resource.k8s.io/v1`
//! kinds, the 1.34 scheduler, which allocates from slices and classes (a change of either wakes
//! the waiting pods), and the 1.34 resourceclaim controller. The `v1alpha2` scheduler does not
//! run: `PodSchedulingContexts` are not served in 1.34. Where `DRADeviceTaints` is on, the
//! device-taint eviction controller runs too, with informers of its own (as it runs in
//! kube-controller-manager), and where rules count an informer of `DeviceTaintRules` in the
//! version that serves them feeds it and the scheduler.
//!
//! Only plumbing; what both generations share is in the parent module.

use std::sync::Arc;

use kube::runtime::reflector::{self, store::Writer};

use super::{closer, gc_kinds, stores, workers, Env, Informers, Parts};
use crate::actors::claims::v1::ClaimControllerV1;
use crate::actors::device_taints::rules::{
    taint_gates, RuleV1alpha3, RuleV1beta2, RuleVersion, TaintSource,
};
use crate::actors::pod_shape::Pod134;
use crate::actors::scheduler_v1::sharing::Sharing;
use crate::actors::scheduler_v1::SchedulerV1;
use crate::actors::taint_eviction::TaintEviction;
use crate::actors::{Result, Started};
use crate::ServedApi;
use dra_runtime::informer::Change;
use dra_types::resource_v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};

super::generation::generation! {
    /// Kubernetes 1.34.
    V1 {
        pods: Pod134, claims: ResourceClaim, slices: ResourceSlice, templates: ResourceClaimTemplate,
        classes: DeviceClass, scheduler: SchedulerV1 = "scheduler-v1",
        controller: ClaimControllerV1, slices_wake_scheduler: true,
    }
}

/// Starts the 1.34 actors' informers, waits until each has listed once, then starts the workers.
pub(super) async fn start(env: &Env<'_>) -> Result<Started> {
    let (stores, writers) = stores::<V1>();
    let version = env.config.kubernetes_version;
    // The server was started with the same overrides and refused them if they were wrong.
    let served =
        ServedApi::new(version, &env.config.api).unwrap_or_else(|_| ServedApi::defaults(version));
    let (gates, rule_version) = taint_gates(&served);
    let (rules, rules_writer) = reflector::store::<DeviceTaintRule>();
    let source = TaintSource {
        gates,
        rules: rule_version.map(|_| rules),
    };
    let scheduler = SchedulerV1::new(
        env.client.clone(),
        stores.pods.clone(),
        stores.nodes.clone(),
        stores.claims.clone(),
        stores.slices.clone(),
        stores.classes.clone(),
        source.clone(),
    )
    .with_extended_resources(
        served
            .gates
            .enabled(crate::FeatureGate::DRAExtendedResource),
    )
    .with_sharing(Sharing {
        partitionable: served
            .gates
            .enabled(crate::FeatureGate::DRAPartitionableDevices),
        consumable: served
            .gates
            .enabled(crate::FeatureGate::DRAConsumableCapacity),
    });
    let eviction = gates.taints.then(|| {
        let (pods, pods_w) = reflector::store();
        let (claims, claims_w) = reflector::store();
        let (slices, slices_w) = reflector::store();
        let controller = TaintEviction::new(
            env.client.clone(),
            (pods, claims, slices),
            source.clone(),
            rule_version,
            env.config.rule_status_period,
        );
        (Arc::new(controller), (pods_w, claims_w, slices_w))
    });
    let evictor = eviction.as_ref().map(|(e, _)| Arc::clone(e));
    let parts = Parts::<V1>::new(env, &stores, scheduler, gc_kinds::<V1>(Vec::new()));
    let mut started = parts
        .start(env, writers, |parts, informers| {
            if let Some((eviction, (pods, claims, slices))) = eviction {
                let e = Arc::clone(&eviction);
                informers.watch_as::<Pod134, _>(pods, move |change| e.on_pod(&change));
                let e = Arc::clone(&eviction);
                informers.watch(claims, move |change| e.on_claim(&change));
                informers.watch(slices, move |change| eviction.on_slice(&change));
            }
            if let Some(version) = rule_version {
                let scheduler = Arc::clone(&parts.scheduler);
                let evictor = evictor.clone();
                watch_rules(informers, version, rules_writer, move |change| {
                    scheduler.queue_all_waiting();
                    if let Some(evictor) = &evictor {
                        evictor.on_rule(&change);
                    }
                });
            }
        })
        .await?;
    if let Some(evictor) = evictor {
        let workers_count = env.config.claim_workers;
        started.tasks.extend(workers(
            &evictor,
            &evictor.queue,
            workers_count,
            "device-taint-eviction",
            |e: Arc<TaintEviction>, key| async move { e.sync_pod(key).await },
        ));
        started.tasks.extend(workers(
            &evictor,
            &evictor.rule_queue,
            1,
            "device-taint-rule-status",
            |e: Arc<TaintEviction>, name| async move { e.sync_rule(name).await },
        ));
        started.queues_close.push(closer(&evictor.queue));
        started.queues_close.push(closer(&evictor.rule_queue));
    }
    Ok(started)
}

/// Starts the informer of the rules in `version`.
fn watch_rules(
    informers: &mut Informers<'_>,
    version: RuleVersion,
    writer: Writer<DeviceTaintRule>,
    on_change: impl Fn(Change<'_, DeviceTaintRule>) + Send + 'static,
) {
    match version {
        RuleVersion::V1 => informers.watch(writer, on_change),
        RuleVersion::V1beta2 => informers.watch_as::<RuleV1beta2, _>(writer, on_change),
        RuleVersion::V1alpha3 => informers.watch_as::<RuleV1alpha3, _>(writer, on_change),
    }
}

//! Wiring of a 1.30 (`v1alpha2`) cluster: the `resource.k8s.io/v1alpha2` kinds, the 1.30
//! scheduler with its `PodSchedulingContexts` (watched only here) and the resourceclaim
//! controller. Slices feed only the garbage collector: the 1.30 scheduler leaves allocation to
//! the drivers.
//!
//! Only plumbing; what both generations share is in the parent module.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimTemplate, ResourceClass, ResourceSlice,
};
use kube::runtime::reflector;

use super::{gc_kind, gc_kinds as common_gc_kinds, meta_change, stores, Env, Parts};
use crate::actors::claims::ClaimController;
use crate::actors::gc::Kind;
use crate::actors::scheduler_v1alpha2::Scheduler;
use crate::actors::{Result, Started};

super::generation::generation! {
    /// Kubernetes 1.30.
    V1alpha2 {
        pods: Pod, claims: ResourceClaim, slices: ResourceSlice, templates: ResourceClaimTemplate,
        classes: ResourceClass, scheduler: Scheduler = "scheduler",
        controller: ClaimController, slices_wake_scheduler: false,
    }
}

/// The kinds the 1.30 garbage collector tracks: the common ones with the contexts after the
/// claims.
pub(in crate::actors) fn gc_kinds() -> Vec<Kind> {
    common_gc_kinds::<V1alpha2>(vec![gc_kind::<PodSchedulingContext>(true)])
}

/// Starts the 1.30 actors' informers, waits until each has listed once, then starts the workers.
pub(super) async fn start(env: &Env<'_>) -> Result<Started> {
    let (stores, writers) = stores::<V1alpha2>();
    let (contexts, contexts_w) = reflector::store::<PodSchedulingContext>();
    let scheduler = Scheduler::new(
        env.client.clone(),
        stores.pods.clone(),
        stores.nodes.clone(),
        stores.claims.clone(),
        contexts,
        stores.classes.clone(),
    );
    let parts = Parts::<V1alpha2>::new(env, &stores, scheduler, gc_kinds());
    parts
        .start(env, writers, |parts, informers| {
            let (s, g, kind) = (
                Arc::clone(&parts.scheduler),
                Arc::clone(&parts.gc),
                parts.gc_index::<PodSchedulingContext>(),
            );
            informers.watch(contexts_w, move |change| {
                s.on_context(&change);
                g.observe(kind, &meta_change(&change));
            });
        })
        .await
}

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
use kube::Client;
use tokio::sync::watch;

use super::{
    gc_kind, gc_kinds as common_gc_kinds, meta_change, stores, Generation, Informers, Parts,
};
use crate::actors::claims::ClaimController;
use crate::actors::gc::Kind;
use crate::actors::plugins::Plugins;
use crate::actors::scheduler_v1alpha2::Scheduler;
use crate::actors::{ActorsConfig, Result, Started};

/// Kubernetes 1.30.
struct V1alpha2;

impl Generation for V1alpha2 {
    type PodWire = Pod;
    type Claim = ResourceClaim;
    type Slice = ResourceSlice;
    type Template = ResourceClaimTemplate;
    type Class = ResourceClass;
    type Scheduler = Scheduler;
    type Controller = ClaimController;
    const SLICES_WAKE_SCHEDULER: bool = false;
}

super::scheduler_loop!(Scheduler, ResourceClaim, "scheduler");
super::controller_loop!(ClaimController, ResourceClaim);

/// The kinds the 1.30 garbage collector tracks: the common ones with the contexts after the
/// claims.
pub(in crate::actors) fn gc_kinds() -> Vec<Kind> {
    common_gc_kinds::<V1alpha2>(vec![gc_kind::<PodSchedulingContext>(true)])
}

/// Starts the 1.30 actors' informers, waits until each has listed once, then starts the workers.
pub(super) async fn start(
    client: &Client,
    config: &ActorsConfig,
    plugins: &Arc<Plugins>,
    stop: &watch::Receiver<bool>,
) -> Result<Started> {
    let (stores, writers) = stores::<V1alpha2>();
    let (contexts, contexts_w) = reflector::store::<PodSchedulingContext>();
    let scheduler = Scheduler::new(
        client.clone(),
        stores.pods.clone(),
        stores.nodes.clone(),
        stores.claims.clone(),
        contexts,
        stores.classes.clone(),
    );
    let controller = ClaimController::new(
        client.clone(),
        stores.pods.clone(),
        stores.claims.clone(),
        stores.templates.clone(),
    );
    let parts = Parts::<V1alpha2>::new(
        client,
        config,
        plugins,
        &stores.pods,
        (scheduler, controller),
        gc_kinds(),
    );
    let mut informers = Informers::new(client, stop);
    parts.watch_common(&mut informers, writers);
    let (s, g, kind) = (
        Arc::clone(&parts.scheduler),
        Arc::clone(&parts.gc),
        parts.gc_index::<PodSchedulingContext>(),
    );
    informers.watch(contexts_w, move |change| {
        s.on_context(&change);
        g.observe(kind, &meta_change(&change));
    });
    parts.start(informers, config).await
}

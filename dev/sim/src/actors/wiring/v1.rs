//! Wiring of a 1.34 (`v1`) cluster: pods read in the 1.34 shape, the `resource.k8s.io/v1` kinds,
//! the 1.34 scheduler, which allocates from slices and classes (a change of either wakes the
//! waiting pods), and the 1.34 resourceclaim controller. The `v1alpha2` scheduler does not run:
//! `PodSchedulingContexts` are not served in 1.34.
//!
//! Only plumbing; what both generations share is in the parent module.

use super::{gc_kinds, stores, Env, Parts};
use crate::actors::claims::v1::ClaimControllerV1;
use crate::actors::pod_shape::Pod134;
use crate::actors::scheduler_v1::SchedulerV1;
use crate::actors::{Result, Started};
use dra_types::resource_v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};

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
    let scheduler = SchedulerV1::new(
        env.client.clone(),
        stores.pods.clone(),
        stores.nodes.clone(),
        stores.claims.clone(),
        stores.slices.clone(),
        stores.classes.clone(),
    );
    let parts = Parts::<V1>::new(env, &stores, scheduler, gc_kinds::<V1>(Vec::new()));
    parts.start(env, writers, |_, _| {}).await
}

//! Wiring of a 1.34 (`v1`) cluster: pods read in the 1.34 shape, the `resource.k8s.io/v1` kinds,
//! the 1.34 scheduler, which allocates from slices and classes (a change of either wakes the
//! waiting pods), and the 1.34 resourceclaim controller. The `v1alpha2` scheduler does not run:
//! `PodSchedulingContexts` are not served in 1.34.
//!
//! Only plumbing; what both generations share is in the parent module.

use std::sync::Arc;

use kube::Client;
use tokio::sync::watch;

use super::{gc_kinds, stores, Generation, Informers, Parts};
use crate::actors::claims::v1::ClaimControllerV1;
use crate::actors::plugins::Plugins;
use crate::actors::pod_shape::Pod134;
use crate::actors::resource_v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use crate::actors::scheduler_v1::SchedulerV1;
use crate::actors::{ActorsConfig, Result, Started};

/// Kubernetes 1.34.
struct V1;

impl Generation for V1 {
    type PodWire = Pod134;
    type Claim = ResourceClaim;
    type Slice = ResourceSlice;
    type Template = ResourceClaimTemplate;
    type Class = DeviceClass;
    type Scheduler = SchedulerV1;
    type Controller = ClaimControllerV1;
    const SLICES_WAKE_SCHEDULER: bool = true;
}

super::scheduler_loop!(SchedulerV1, ResourceClaim, "scheduler-v1");
super::controller_loop!(ClaimControllerV1, ResourceClaim);

/// Starts the 1.34 actors' informers, waits until each has listed once, then starts the workers.
pub(super) async fn start(
    client: &Client,
    config: &ActorsConfig,
    plugins: &Arc<Plugins>,
    stop: &watch::Receiver<bool>,
) -> Result<Started> {
    let (stores, writers) = stores::<V1>();
    let scheduler = SchedulerV1::new(
        client.clone(),
        stores.pods.clone(),
        stores.nodes.clone(),
        stores.claims.clone(),
        stores.slices.clone(),
        stores.classes.clone(),
    );
    let controller = ClaimControllerV1::new(
        client.clone(),
        stores.pods.clone(),
        stores.claims.clone(),
        stores.templates.clone(),
    );
    let parts = Parts::<V1>::new(
        client,
        config,
        plugins,
        &stores.pods,
        (scheduler, controller),
        gc_kinds::<V1>(Vec::new()),
    );
    let mut informers = Informers::new(client, stop);
    parts.watch_common(&mut informers, writers);
    parts.start(informers, config).await
}

//! What tells the generations apart, as the wiring sees it: the [`Generation`] trait naming a
//! generation's types, the [`SchedulerLoop`] and [`ControllerLoop`] traits through which the
//! shared wiring drives its scheduler and resourceclaim controller, and `generation!`, which
//! declares a generation and implements both loops over the actors' own methods.
//!
//! Only declarations; must not start anything.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::actors::{ObjectKey, Result};
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};

/// A kind an informer can watch.
pub(super) trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
}

/// The types that tell the generations apart.
pub(super) trait Generation: 'static {
    /// What pods are decoded as before they are stored as `Pod`.
    type PodWire: Watched + Into<Pod>;
    /// `ResourceClaim`.
    type Claim: Watched;
    /// `ResourceSlice`.
    type Slice: Watched;
    /// `ResourceClaimTemplate`.
    type Template: Watched;
    /// `ResourceClass` (1.30) or `DeviceClass` (1.34).
    type Class: Watched;
    /// The scheduler.
    type Scheduler: SchedulerLoop<Claim = Self::Claim>;
    /// The resourceclaim controller.
    type Controller: ControllerLoop<Claim = Self::Claim, Template = Self::Template>;
    /// Whether the scheduler allocates from `ResourceSlices`, so that a slice change wakes the
    /// pods waiting for devices.
    const SLICES_WAKE_SCHEDULER: bool;
}

/// A generation's scheduler, as the wiring drives it.
pub(super) trait SchedulerLoop: Send + Sync + 'static {
    /// The claim type it watches.
    type Claim;
    /// The name of its workers.
    const WORKERS: &'static str;
    /// Its work queue.
    fn queue(&self) -> &WorkQueue<ObjectKey>;
    /// Routes a pod change.
    fn on_pod(&self, change: &Change<'_, Pod>);
    /// Routes a claim change.
    fn on_claim(&self, change: &Change<'_, Self::Claim>);
    /// Wakes every pod waiting for something to change.
    fn queue_all_waiting(&self);
    /// One scheduling cycle of a pod.
    fn sync(self: Arc<Self>, key: ObjectKey) -> impl Future<Output = Result<Next>> + Send;
}

/// A generation's resourceclaim controller, as the wiring drives it.
pub(super) trait ControllerLoop: Send + Sync + 'static {
    /// The claim type it watches.
    type Claim: Watched;
    /// The template type it makes claims from.
    type Template: Watched;
    /// A controller reading the given stores.
    fn new(
        client: Client,
        pods: Store<Pod>,
        claims: Store<Self::Claim>,
        templates: Store<Self::Template>,
    ) -> Self;
    /// Its queue of pods.
    fn pod_queue(&self) -> &WorkQueue<ObjectKey>;
    /// Its queue of claims.
    fn claim_queue(&self) -> &WorkQueue<ObjectKey>;
    /// Routes a pod change.
    fn on_pod(&self, change: &Change<'_, Pod>);
    /// Routes a claim change.
    fn on_claim(&self, change: &Change<'_, Self::Claim>);
    /// One sync of a pod.
    fn sync_pod(self: Arc<Self>, key: ObjectKey) -> impl Future<Output = Result<Next>> + Send;
    /// One sync of a claim.
    fn sync_claim(self: Arc<Self>, key: ObjectKey) -> impl Future<Output = Result<Next>> + Send;
}

/// Implements [`SchedulerLoop`] for a scheduler type with the inherent methods of that name.
macro_rules! scheduler_loop {
    ($scheduler:ty, $claim:ty, $workers:literal) => {
        impl super::generation::SchedulerLoop for $scheduler {
            type Claim = $claim;
            const WORKERS: &'static str = $workers;
            fn queue(&self) -> &dra_runtime::workqueue::WorkQueue<crate::actors::ObjectKey> {
                &self.queue
            }
            fn on_pod(
                &self,
                change: &dra_runtime::informer::Change<'_, k8s_openapi::api::core::v1::Pod>,
            ) {
                <$scheduler>::on_pod(self, change);
            }
            fn on_claim(&self, change: &dra_runtime::informer::Change<'_, $claim>) {
                <$scheduler>::on_claim(self, change);
            }
            fn queue_all_waiting(&self) {
                <$scheduler>::queue_all_waiting(self);
            }
            fn sync(
                self: std::sync::Arc<Self>,
                key: crate::actors::ObjectKey,
            ) -> impl std::future::Future<
                Output = crate::actors::Result<dra_runtime::workqueue::Next>,
            > + Send {
                async move { <$scheduler>::sync(&self, key).await }
            }
        }
    };
}

/// Implements [`ControllerLoop`] for a controller type with the inherent methods of that name.
macro_rules! controller_loop {
    ($controller:ty, $claim:ty, $template:ty) => {
        impl super::generation::ControllerLoop for $controller {
            type Claim = $claim;
            type Template = $template;
            fn new(
                client: kube::Client,
                pods: kube::runtime::reflector::Store<k8s_openapi::api::core::v1::Pod>,
                claims: kube::runtime::reflector::Store<$claim>,
                templates: kube::runtime::reflector::Store<$template>,
            ) -> Self {
                <$controller>::new(client, pods, claims, templates)
            }
            fn pod_queue(&self) -> &dra_runtime::workqueue::WorkQueue<crate::actors::ObjectKey> {
                &self.pod_queue
            }
            fn claim_queue(&self) -> &dra_runtime::workqueue::WorkQueue<crate::actors::ObjectKey> {
                &self.claim_queue
            }
            fn on_pod(
                &self,
                change: &dra_runtime::informer::Change<'_, k8s_openapi::api::core::v1::Pod>,
            ) {
                <$controller>::on_pod(self, change);
            }
            fn on_claim(&self, change: &dra_runtime::informer::Change<'_, $claim>) {
                <$controller>::on_claim(self, change);
            }
            fn sync_pod(
                self: std::sync::Arc<Self>,
                key: crate::actors::ObjectKey,
            ) -> impl std::future::Future<
                Output = crate::actors::Result<dra_runtime::workqueue::Next>,
            > + Send {
                async move { <$controller>::sync_pod(&self, key).await }
            }
            fn sync_claim(
                self: std::sync::Arc<Self>,
                key: crate::actors::ObjectKey,
            ) -> impl std::future::Future<
                Output = crate::actors::Result<dra_runtime::workqueue::Next>,
            > + Send {
                async move { <$controller>::sync_claim(&self, key).await }
            }
        }
    };
}
/// Declares a generation: its marker type, the types of [`Generation`], and the loops of its
/// scheduler (with the name of its workers) and controller.
macro_rules! generation {
    (
        $(#[$doc:meta])* $name:ident {
            pods: $pods:ty, claims: $claim:ty, slices: $slice:ty, templates: $template:ty,
            classes: $class:ty, scheduler: $scheduler:ty = $workers:literal,
            controller: $controller:ty, slices_wake_scheduler: $wake:literal $(,)?
        }
    ) => {
        $(#[$doc])*
        struct $name;

        impl super::generation::Generation for $name {
            type PodWire = $pods;
            type Claim = $claim;
            type Slice = $slice;
            type Template = $template;
            type Class = $class;
            type Scheduler = $scheduler;
            type Controller = $controller;
            const SLICES_WAKE_SCHEDULER: bool = $wake;
        }

        super::generation::scheduler_loop!($scheduler, $claim, $workers);
        super::generation::controller_loop!($controller, $claim, $template);
    };
}
pub(super) use {controller_loop, generation, scheduler_loop};

//! Shared harness of the framework tests: a controller over the fake API, memory caches and the
//! scripted driver, with the upstream fixtures.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::sync::Arc;

use dra_framework::testing::fixtures::{
    claim, class, context, nodes, pod, ClaimFixture, ContextFixture, PodFixture, CLAIM, NAMESPACE,
    NODE, OTHER_NODE, POD, POD_CLAIM,
};
use dra_framework::testing::{DriverCall, FakeApi, MemoryCaches, ScriptedDriver, Write};
use dra_framework::{Controller, ControllerConfig, EventType, QueueKey, Result, SyncOutcome};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimStatus, ResourceClass,
};

pub use dra_framework::testing::fixtures::DRIVER;

/// Cache queries used by the tests.
pub trait CachesExt {
    /// Whether the cached claim has no allocation.
    fn claim_is_unallocated(&self, name: &str) -> bool;
}

impl CachesExt for MemoryCaches {
    fn claim_is_unallocated(&self, name: &str) -> bool {
        use dra_framework::Caches;
        self.claim(NAMESPACE, name)
            .is_some_and(|c| c.status.as_ref().is_none_or(|s| s.allocation.is_none()))
    }
}

/// The objects, the driver and the controller of one test.
pub struct Harness {
    pub api: Arc<FakeApi>,
    pub caches: Arc<MemoryCaches>,
    pub driver: Arc<ScriptedDriver>,
    pub controller: Controller<ScriptedDriver>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_config(ControllerConfig::default())
    }

    pub fn with_config(config: ControllerConfig) -> Self {
        let api = Arc::new(FakeApi::new());
        let caches = Arc::new(MemoryCaches::new());
        let driver = Arc::new(ScriptedDriver::new(DRIVER));
        let controller =
            Controller::from_parts(DRIVER, driver.clone(), api.clone(), caches.clone(), config);
        Self {
            api,
            caches,
            driver,
            controller,
        }
    }

    /// Our class, the delayed claim and the pod that refers to it as `POD_CLAIM`; the
    /// scheduling context is the test's.
    pub fn delayed_pod() -> Self {
        Self::new()
            .with_class(class())
            .with_claim(claim().delayed())
            .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
    }

    /// [`Harness::delayed_pod`] with `NODE` selected out of `NODE` and `OTHER_NODE`, where the
    /// driver finds `OTHER_NODE` unsuitable.
    pub fn selected_node_fits() -> Self {
        let h = Self::delayed_pod()
            .with_context(context().selected(NODE).potential(&[NODE, OTHER_NODE]));
        h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
        h
    }

    /// [`Harness::delayed_pod`] with the node `NODE` selected out of 128 potential nodes,
    /// and `unsuitable` reported unsuitable by the driver.
    pub fn truncation(unsuitable: &[String]) -> Self {
        let h = Self::delayed_pod().with_context(context().selected(NODE).potential(&nodes(128)));
        let list: Vec<&str> = unsuitable.iter().map(String::as_str).collect();
        h.driver.set_unsuitable(POD_CLAIM, &list);
        h
    }

    /// The driver's `unsuitable_nodes` calls so far.
    pub fn unsuitable_calls(&self) -> Vec<DriverCall> {
        self.driver
            .calls()
            .into_iter()
            .filter(|c| matches!(c, DriverCall::UnsuitableNodes { .. }))
            .collect()
    }

    /// Puts a claim into both the API server and the watch cache.
    pub fn with_claim(self, claim: ResourceClaim) -> Self {
        self.api.insert_claim(claim.clone());
        self.caches.put_claim(claim);
        self
    }

    pub fn with_class(self, class: ResourceClass) -> Self {
        self.caches.put_class(class);
        self
    }

    pub fn with_pod(self, pod: Pod) -> Self {
        self.caches.put_pod(pod);
        self
    }

    pub fn with_context(self, context: PodSchedulingContext) -> Self {
        self.api.insert_context(context.clone());
        self.caches.put_context(context);
        self
    }

    /// Copies the API server's claim and context into the caches (the watch catching up).
    pub fn refresh_caches(&self, claim: &str) {
        if let Some(c) = self.api.claim(NAMESPACE, claim) {
            self.caches.put_claim(c);
        }
        if let Some(c) = self.api.context(NAMESPACE, POD) {
            self.caches.put_context(c);
        }
    }

    pub async fn sync_claim(&self, name: &str) -> Result<SyncOutcome> {
        self.controller
            .sync(&QueueKey::claim(NAMESPACE, name))
            .await
    }

    pub async fn sync_context(&self) -> Result<SyncOutcome> {
        self.controller
            .sync(&QueueKey::scheduling_context(NAMESPACE, POD))
            .await
    }

    /// How often the context's key was requeued after a failed sync.
    pub fn claim_requeues(&self, name: &str) -> u32 {
        self.controller
            .queue()
            .num_requeues(&QueueKey::claim(NAMESPACE, name))
    }

    pub fn context_requeues(&self) -> u32 {
        self.controller
            .queue()
            .num_requeues(&QueueKey::scheduling_context(NAMESPACE, POD))
    }

    /// The claim as stored by the API server, without its resourceVersion.
    pub fn stored_claim(&self, name: &str) -> ResourceClaim {
        unversioned(self.api.claim(NAMESPACE, name).expect("claim stored"))
    }

    /// The context as stored by the API server, without its resourceVersion.
    pub fn stored_context(&self) -> PodSchedulingContext {
        let mut c = self.api.context(NAMESPACE, POD).expect("context stored");
        c.metadata.resource_version = None;
        c
    }

    /// `(kind of object, type, reason, message)` of every event.
    pub fn events(&self) -> Vec<(String, EventType, String, String)> {
        self.api
            .events()
            .into_iter()
            .map(|e| {
                (
                    e.regarding.kind.unwrap_or_default(),
                    e.type_,
                    e.reason,
                    e.message,
                )
            })
            .collect()
    }

    pub fn claim_writes(&self) -> usize {
        self.api
            .writes()
            .iter()
            .filter(|w| matches!(w, Write::UpdateClaim(_) | Write::UpdateClaimStatus(_)))
            .count()
    }

    pub fn context_writes(&self) -> usize {
        self.api
            .writes()
            .iter()
            .filter(|w| matches!(w, Write::PatchContextStatus { .. }))
            .count()
    }
}

/// The claim with its resourceVersion cleared and empty lists and status dropped (as the API
/// server would omit them), for comparisons with stored objects.
pub fn unversioned(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.resource_version = None;
    if claim
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(Vec::is_empty)
    {
        claim.metadata.finalizers = None;
    }
    if claim.status == Some(ResourceClaimStatus::default()) {
        claim.status = None;
    }
    claim
}

/// The context with its resourceVersion cleared.
pub fn unversioned_context(mut context: PodSchedulingContext) -> PodSchedulingContext {
    context.metadata.resource_version = None;
    context
}

/// A failed-sync event on an object of `kind`.
pub fn failed_event(kind: &str, message: &str) -> (String, EventType, String, String) {
    (
        kind.to_owned(),
        EventType::Warning,
        "Failed".to_owned(),
        message.to_owned(),
    )
}

/// The driver's check of the pod's claim `CLAIM` against `nodes`.
pub fn claim_checked_on<S: AsRef<str>>(nodes: &[S]) -> DriverCall {
    DriverCall::UnsuitableNodes {
        pod: POD.into(),
        claims: vec![CLAIM.into()],
        potential_nodes: nodes.iter().map(|n| n.as_ref().to_owned()).collect(),
    }
}

//! Shared harness of the framework tests: a controller over the fake API, memory caches and the
//! scripted driver, with the upstream fixtures.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::sync::Arc;

use dra_framework::testing::fixtures::{NAMESPACE, POD};
use dra_framework::testing::{FakeApi, MemoryCaches, ScriptedDriver, Write};
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

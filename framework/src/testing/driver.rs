//! [`ScriptedDriver`]: a [`Driver`] whose answers are set by the test and whose calls are recorded.

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClass, ResourceHandle,
};
use kube::ResourceExt;

use crate::driver::{ClaimAllocation, Driver};

/// The error a [`ScriptedDriver`] was told to fail with: the message it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScriptedError(pub String);

/// One recorded call of the [`ScriptedDriver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverCall {
    /// `get_class_parameters(class)`.
    ClassParameters {
        /// Class name.
        class: String,
    },
    /// `get_claim_parameters(claim, class, class_parameters)`.
    ClaimParameters {
        /// Claim name.
        claim: String,
        /// The class parameters passed in.
        class_parameters: String,
    },
    /// `allocate(claims, selected_node)`.
    Allocate {
        /// Claim names, in order.
        claims: Vec<String>,
        /// The selected node.
        selected_node: Option<String>,
        /// Class and claim parameters of each claim.
        parameters: Vec<(String, String)>,
    },
    /// `deallocate(claim)`.
    Deallocate {
        /// Claim name.
        claim: String,
    },
    /// `unsuitable_nodes(pod, claims, potential_nodes)`.
    UnsuitableNodes {
        /// Pod name.
        pod: String,
        /// Claim names, in order.
        claims: Vec<String>,
        /// The candidate nodes passed in.
        potential_nodes: Vec<String>,
    },
}

#[derive(Default)]
struct Script {
    class_parameters_error: Option<String>,
    claim_parameters_error: Option<String>,
    allocate_errors: HashMap<String, String>,
    allocate_nothing: bool,
    deallocate_error: Option<String>,
    unsuitable: HashMap<String, Vec<String>>,
    unsuitable_error: Option<String>,
    allocate_delay: Duration,
}

/// A driver that succeeds unless told otherwise. Class parameters are `"class:<name>"`, claim
/// parameters `"claim:<name>"`; an allocation has one resource handle whose data names the node
/// (or `"immediate"`).
#[derive(Default)]
pub struct ScriptedDriver {
    name: String,
    script: Mutex<Script>,
    calls: Mutex<Vec<DriverCall>>,
    published_deallocations: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl ScriptedDriver {
    /// A driver whose allocations carry `driver_name` in their resource handle.
    pub fn new(driver_name: &str) -> Self {
        Self {
            name: driver_name.to_owned(),
            ..Self::default()
        }
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock_or_recover()
    }

    fn record(&self, call: DriverCall) {
        self.calls.lock_or_recover().push(call);
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Vec<DriverCall> {
        self.calls.lock_or_recover().clone()
    }

    /// The claims passed to `deallocation_published`, oldest first, each with `allocated` or
    /// `unallocated` for the status it was called with.
    pub fn published_deallocations(&self) -> Vec<String> {
        self.published_deallocations.lock_or_recover().clone()
    }

    /// Only the `allocate` calls.
    pub fn allocate_calls(&self) -> Vec<DriverCall> {
        self.calls()
            .into_iter()
            .filter(|c| matches!(c, DriverCall::Allocate { .. }))
            .collect()
    }

    /// Class parameters fail with `message` (`None`: succeed).
    pub fn set_class_parameters_error(&self, message: Option<&str>) {
        self.script().class_parameters_error = message.map(str::to_owned);
    }

    /// Claim parameters fail with `message` (`None`: succeed).
    pub fn set_claim_parameters_error(&self, message: Option<&str>) {
        self.script().claim_parameters_error = message.map(str::to_owned);
    }

    /// Allocation of claim `claim` fails with `message`.
    pub fn fail_allocate(&self, claim: &str, message: &str) {
        self.script()
            .allocate_errors
            .insert(claim.to_owned(), message.to_owned());
    }

    /// Allocate sets neither an allocation nor an error.
    pub fn set_allocate_nothing(&self, nothing: bool) {
        self.script().allocate_nothing = nothing;
    }

    /// Deallocate fails with `message` (`None`: succeed).
    pub fn set_deallocate_error(&self, message: Option<&str>) {
        self.script().deallocate_error = message.map(str::to_owned);
    }

    /// Nodes reported unsuitable for the pod claim `pod_claim`.
    pub fn set_unsuitable(&self, pod_claim: &str, nodes: &[&str]) {
        self.script().unsuitable.insert(
            pod_claim.to_owned(),
            nodes.iter().map(|n| (*n).to_owned()).collect(),
        );
    }

    /// Unsuitable-node checks fail with `message` (`None`: succeed).
    pub fn set_unsuitable_error(&self, message: Option<&str>) {
        self.script().unsuitable_error = message.map(str::to_owned);
    }

    /// Every allocate call sleeps this long (to observe concurrency).
    pub fn set_allocate_delay(&self, delay: Duration) {
        self.script().allocate_delay = delay;
    }

    /// The largest number of allocate calls that ran at the same time.
    pub fn max_concurrent_allocations(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// The allocation this driver produces for `node` (`None`: immediate).
    pub fn allocation_for(&self, node: Option<&str>) -> AllocationResult {
        AllocationResult {
            resource_handles: Some(vec![ResourceHandle {
                driver_name: Some(self.name.clone()),
                data: Some(node.unwrap_or("immediate").to_owned()),
                structured_data: None,
            }]),
            available_on_nodes: None,
            shareable: None,
        }
    }
}

#[async_trait]
impl Driver for ScriptedDriver {
    type ClassParameters = String;
    type ClaimParameters = String;
    type Error = ScriptedError;

    async fn get_class_parameters(&self, class: &ResourceClass) -> Result<String, ScriptedError> {
        self.record(DriverCall::ClassParameters {
            class: class.name_any(),
        });
        match &self.script().class_parameters_error {
            Some(e) => Err(ScriptedError(e.clone())),
            None => Ok(format!("class:{}", class.name_any())),
        }
    }

    async fn get_claim_parameters(
        &self,
        claim: &ResourceClaim,
        _class: &ResourceClass,
        class_parameters: &String,
    ) -> Result<String, ScriptedError> {
        self.record(DriverCall::ClaimParameters {
            claim: claim.name_any(),
            class_parameters: class_parameters.clone(),
        });
        match &self.script().claim_parameters_error {
            Some(e) => Err(ScriptedError(e.clone())),
            None => Ok(format!("claim:{}", claim.name_any())),
        }
    }

    async fn allocate(&self, claims: &mut [ClaimAllocation<Self>], selected_node: Option<&str>) {
        self.record(DriverCall::Allocate {
            claims: claims.iter().map(|c| c.claim_name().to_owned()).collect(),
            selected_node: selected_node.map(str::to_owned),
            parameters: claims
                .iter()
                .map(|c| {
                    (
                        c.class_parameters.as_ref().clone(),
                        c.claim_parameters.as_ref().clone(),
                    )
                })
                .collect(),
        });
        let delay = self.script().allocate_delay;
        if !delay.is_zero() {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        let script = self.script();
        for item in claims.iter_mut() {
            if let Some(e) = script.allocate_errors.get(item.claim_name()) {
                item.error = Some(ScriptedError(e.clone()));
            } else if !script.allocate_nothing {
                item.allocation = Some(self.allocation_for(selected_node));
            }
        }
    }

    async fn deallocate(&self, claim: &ResourceClaim) -> Result<(), ScriptedError> {
        self.record(DriverCall::Deallocate {
            claim: claim.name_any(),
        });
        match &self.script().deallocate_error {
            Some(e) => Err(ScriptedError(e.clone())),
            None => Ok(()),
        }
    }

    async fn deallocation_published(&self, claim: &ResourceClaim) {
        let allocated = claim
            .status
            .as_ref()
            .is_some_and(|s| s.allocation.is_some());
        let state = if allocated {
            "allocated"
        } else {
            "unallocated"
        };
        self.published_deallocations
            .lock_or_recover()
            .push(format!("{} {state}", claim.name_any()));
    }

    async fn unsuitable_nodes(
        &self,
        pod: &Pod,
        claims: &mut [ClaimAllocation<Self>],
        potential_nodes: &[String],
    ) -> Result<(), ScriptedError> {
        self.record(DriverCall::UnsuitableNodes {
            pod: pod.name_any(),
            claims: claims.iter().map(|c| c.claim_name().to_owned()).collect(),
            potential_nodes: potential_nodes.to_vec(),
        });
        let script = self.script();
        if let Some(e) = &script.unsuitable_error {
            return Err(ScriptedError(e.clone()));
        }
        for item in claims.iter_mut() {
            item.unsuitable_nodes = script
                .unsuitable
                .get(&item.pod_claim_name)
                .cloned()
                .unwrap_or_default();
        }
        Ok(())
    }
}

//! `dra-framework`: the `v1alpha2` DRA (resource.k8s.io/v1alpha2) controller framework, the Rust
//! counterpart of Go's `k8s.io/dynamic-resource-allocation/controller` (v0.30.0), with the
//! improvements listed in `docs/controller.md`.
//!
//! A driver implements [`Driver`]; [`Controller`] watches ResourceClaims, ResourceClasses,
//! PodSchedulingContexts and Pods, queues a [`QueueKey`] per claim and per scheduling context
//! and syncs them with `workers` concurrent workers. Reads come from [`Caches`] (through the
//! [`MutationCache`] for claims), writes go through [`ClusterApi`].
//!
//! Owns the driver-independent part of a `v1alpha2` DRA controller: the watches, the work queue, the
//! sync algorithm and the writes to the API server. Generic over [`Driver`]; must not depend on a
//! particular driver, on the ledger (`dra-allocator`), on the admin API (`dra-api`) or on the
//! simulated cluster (`dra-sim`). The manifest of this crate lists none of them.

// Kubernetes kind names (ResourceClaim, PodSchedulingContext, ...) are prose in these docs, not
// code identifiers; back-ticking every one of them would make the docs harder to read.
#![allow(clippy::doc_markdown)]

mod api;
mod caches;
mod claim_store;
mod controller;
mod driver;
mod error;
mod kube_api;
mod mutation_cache;
mod pod_claims;
mod queue_key;
mod scheduling;
mod sync_claim;
mod sync_context;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use api::ClusterApi;
pub use caches::{Caches, ReflectorCaches};
pub use claim_store::ClaimStore;
pub use controller::{Controller, ControllerConfig, SyncOutcome};
pub use dra_runtime::events::{EventRecord, EventType};
pub use dra_runtime::workqueue::RateLimit;
pub use driver::{ClaimAllocation, Driver};
pub use error::{BoxedDriverError, Error, KubeCallError, KubeCallErrorKind, Result};
pub use kube_api::{kube_call_error, KubeApi};
pub use mutation_cache::MutationCache;
pub use queue_key::{ObjectKey, QueueKey};
pub use scheduling::{status_patch, truncate_nodes, ClaimStatusEntry, NODE_LIST_MAX_SIZE};

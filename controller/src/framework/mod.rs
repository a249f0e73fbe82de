//! The classic DRA controller framework, the Rust counterpart of Go's
//! `k8s.io/dynamic-resource-allocation/controller` (v0.30.0), with the improvements listed in
//! `docs/controller.md`.
//!
//! A driver implements [`Driver`]; [`Controller`] watches ResourceClaims, ResourceClasses,
//! PodSchedulingContexts and Pods, queues a [`QueueKey`] per claim and per scheduling context
//! and syncs them with `workers` concurrent workers. Reads come from [`Caches`] (through the
//! [`MutationCache`] for claims), writes go through [`ClusterApi`]. This module must not depend on a
//! particular driver or on the ledger.

mod api;
mod caches;
mod controller;
mod driver;
mod error;
mod kube_api;
mod mutation_cache;
mod queue_key;
mod scheduling;
mod sync_claim;
mod sync_context;
pub mod testing;
mod workqueue;

pub use api::{object_reference, ClusterApi, EventRecord, EventType};
pub use caches::{Caches, ReflectorCaches};
pub use controller::{Controller, ControllerConfig, SyncOutcome};
pub use driver::{ClaimAllocation, Driver};
pub use error::{Error, KubeCallError, KubeCallErrorKind, Result};
pub use kube_api::{kube_call_error, KubeApi};
pub use mutation_cache::MutationCache;
pub use queue_key::{ObjectKey, QueueKey};
pub use scheduling::{status_patch, truncate_nodes, ClaimStatusEntry, NODE_LIST_MAX_SIZE};
pub use workqueue::{RateLimit, WorkQueue};

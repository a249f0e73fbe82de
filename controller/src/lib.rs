//! `dra-controller`: the classic DRA (resource.k8s.io/v1alpha2) controller framework.
//!
//! [`framework`] owns the driver-independent part: watching claims, classes, scheduling contexts and
//! pods, the work queue, the sync algorithm and the writes to the API server. A resource driver plugs
//! in through [`framework::Driver`]. The framework must not depend on any particular driver or on the
//! ledger.
//!
//! [`driver`] is the ledger-backed resource driver (allocation through the `dra-allocator` ledger,
//! inventory from ResourceSlices, reconcile with the cluster); [`params`] owns the
//! `dra-ledger.io` parameter custom resources and their conversion into the allocator's model.
//! [`leader`] is leader election on a Lease with the fence that stops a replica which lost it
//! from writing. [`cli`] is the `dra-ledger` command line (run, demo, sim, crds, ledger tools); it assembles the
//! driver, the framework, the admin API of `dra-api` and, for the demo, the simulated cluster.

// Kubernetes kind names (ResourceClaim, PodSchedulingContext, ...) are prose in these docs, not
// code identifiers; back-ticking every one of them would make the docs harder to read.
#![allow(clippy::doc_markdown)]

pub mod cli;
pub mod driver;
pub mod framework;
pub mod leader;
pub mod params;

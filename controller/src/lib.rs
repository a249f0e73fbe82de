//! `dra-controller`: the ledger-backed classic DRA (resource.k8s.io/v1alpha2) resource driver and
//! the `dra-ledger` binary.
//!
//! The driver-independent controller (watches, work queue, sync algorithm) is the `dra-framework`
//! crate; [`driver`] plugs into it through `dra_framework::Driver`.
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
pub mod leader;
pub mod params;

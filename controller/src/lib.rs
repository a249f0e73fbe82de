//! `dra-controller`: the ledger of both DRA generations, the composition of a running controller
//! process, and the `dra-ledger` binary. On `v1alpha2` (resource.k8s.io/v1alpha2, Kubernetes
//! 1.27-1.30) the ledger-backed [`driver`] allocates, plugged into the `dra-framework` controller
//! (watches, work queue, sync algorithm) through `dra_framework::Driver`; on `v1`
//! (resource.k8s.io/v1, Kubernetes 1.34+) the kube-scheduler allocates and the [`mirror`] records
//! the slices and allocations in the same ledger.
//!
//! [`driver`] is the ledger-backed resource driver (allocation through the `dra-allocator` ledger,
//! inventory from ResourceSlices, reconcile with the cluster); [`params`] owns the
//! `dra-ledger.io` parameter custom resources and their conversion into the allocator's model.
//! [`leader`] is leader election on a Lease with the fence that stops a replica which lost it
//! from writing. [`process`] assembles them into a running controller: the ledger, the client,
//! the driver, the framework's controller, the admin API of `dra-api` and the elector.
//! [`explain`] answers `dra-ledger explain pod`: why a pod waits, or where its devices are.
//! [`mirror`] is what runs instead of the driver on `resource.k8s.io/v1` clusters (Kubernetes
//! 1.34+), where the kube-scheduler allocates: it allocates nothing and mirrors the slices and
//! the claims' allocations of our devices into the ledger. [`process`] picks one of the two by
//! `--dra-api` (API discovery for `auto`).
//!
//! The `dra-ledger` command line (flags, subcommands, logging, exit codes) is part of the binary
//! target (`src/main.rs` and `src/cli/`), not of this library.
//!
//! Features: `demo` (default) adds `dra-ledger demo` and `dra-ledger sim` to the binary and is
//! the only thing that pulls in `dra-sim`, the simulated cluster; a build with
//! `--no-default-features` (the product image) has neither. `failpoints` compiles in the
//! ledger's and the driver's failpoints for the chaos tests, which require it. `testing` adds
//! `driver::testing` for tests.

// Kubernetes kind names (ResourceClaim, PodSchedulingContext, ...) are prose in these docs, not
// code identifiers; back-ticking every one of them would make the docs harder to read.
#![allow(clippy::doc_markdown)]

pub mod driver;
pub mod explain;
pub mod leader;
pub mod mirror;
pub mod params;
pub mod process;

//! The ledger-backed driver: against a real ledger with an in-memory cluster, against the simulated
//! cluster, its parameters, and property tests of the parsers of outside input (parameters,
//! `ResourceSlice` inventories, resource handles).

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod class_defaults;
mod cluster_api;
#[path = "../e2e/e2e_support/mod.rs"]
mod e2e_support;
mod handle_props;
mod inventory_props;
mod ledger;
mod params;
mod params_props;
mod sim;

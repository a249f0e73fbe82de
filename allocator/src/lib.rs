//! `dra-allocator`: the device model, the pure selection logic and the durable ledger.
//!
//! Module layout:
//! - [`model`]: the device model and the parameters of a request, plain data with serde
//!   derives. `model/quantity.rs` (Kubernetes quantities, exact milli-units),
//!   `model/version.rs` (semantic versions), `model/requirement.rs` (selector requirements:
//!   validation and matching), `model/request.rs` (sharing, policy, claim and class parameters,
//!   the combined [`model::EffectiveRequest`]); `model/mod.rs` holds attribute values, devices
//!   and the parse and validation errors.
//! - [`fit`]: pure allocation decisions over an in-memory [`fit::Inventory`].
//!   `fit/inventory.rs` (nodes, devices, consumers; interned attributes and precomputed
//!   occupancy for the search), `fit/search.rs` (the exact per-node search shared by every entry
//!   point), `fit/choose.rs` (the gang check [`fit::unsuitable_nodes`], the all-or-nothing
//!   [`fit::choose_for_pod`], single requests on a node or on the best node by policy).
//! - [`ledger`]: the redb-backed ledger with its intent journal; it owns all storage and wraps
//!   the pure logic.
//! - [`failpoint`]: named pause points for crash tests, compiled in only with the `failpoints`
//!   feature.
//!
//! `model` and `fit` perform no I/O and must not depend on redb, tokio or kube (nor on
//! `ledger`); for the same input they return the same answer.

pub mod failpoint;
pub mod fit;
pub mod ledger;
pub mod model;

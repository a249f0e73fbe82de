//! `dra-allocator`: the device model, the pure selection logic and the durable ledger.
//!
//! Module layout:
//! - [`model`]: the device model and the parameters of a request, all plain data with serde
//!   derives: attribute values (quantities, semantic versions), devices, selector requirements,
//!   sharing and placement policy, claim and class parameters with their validation.
//! - [`fit`]: pure allocation decisions over an in-memory [`fit::Inventory`]: which devices of a
//!   node are usable, choosing devices for one request (on a node or the best node by policy),
//!   the gang check over a pod's pending claims and the atomic choice for all of them.
//! - [`ledger`]: the redb-backed ledger with its intent journal; it owns all storage and wraps
//!   the pure logic.
//!
//! `model` and `fit` perform no I/O and must not depend on redb, tokio or kube; for the same
//! input they return the same answer.

pub mod fit;
pub mod ledger;
pub mod model;

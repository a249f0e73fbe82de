//! `dra-allocator`: the device model, the pure selection logic and the durable ledger.
//!
//! - [`model`]: the device model and the parameters of a request (quantities, versions,
//!   selector requirements, sharing, policy, the combined [`model::EffectiveRequest`]), plain
//!   data with serde derives.
//! - [`fit`]: pure allocation decisions over an in-memory [`fit::Inventory`]: the gang check
//!   [`fit::unsuitable_nodes`], the all-or-nothing [`fit::choose_for_pod`], single requests on a
//!   node or on the best node by policy.
//! - [`ledger`]: the redb-backed [`ledger::Ledger`] with its intent journal; it owns all storage
//!   and wraps the pure logic (the file format is described in `docs/ledger.md`).
//! - [`usage`]: pure usage accounting over holder intervals (device-seconds, claims and peak
//!   devices per namespace, node, model or claim inside a window).
//! - [`capacity`]: pure accounting of partitions and shares: the physical unit (GPU) each
//!   device belongs to, what claims hold of it, utilisation in whole-device equivalents and in
//!   capacity per node and per model.
//! - [`idle`]: which allocated claims no consumer uses and since when, as the observers of
//!   both generations report them (in memory; the admin API's `GET /v1/idle`).
//! - [`handle`]: the resource handle data the controller writes and the node agent reads.
//! - [`failpoint`]: named pause points for crash tests, compiled in only with the `failpoints`
//!   feature.
//!
//! Each module's own `//!` doc says what its files own. `examples/ledger_basics.rs` shows the
//! ledger used through this API.
//!
//! `model`, `fit`, `usage`, `capacity` and `idle` perform no I/O and must not depend on redb,
//! tokio or kube (nor on `ledger`); for the same input they return the same answer.

pub mod capacity;
pub mod failpoint;
pub mod fit;
pub mod handle;
pub mod idle;
pub mod ledger;
pub mod model;
pub mod usage;

//! `dra-api`: the admin HTTP API of dra-ledger.
//!
//! [`router()`] serves the routes listed in `docs/admin-api.md` (the one table of them, with the
//! token rules and error codes); [`openapi()`] is the OpenAPI 3 document of the same routes,
//! generated from the handler registrations and served at `GET /v1/openapi.json`. Errors are
//! `{"error": {"code": "...", "message": "..."}}`; 5xx answers carry a generic message while the
//! cause is logged.
//!
//! Modules:
//! - [`metrics`]: `dra-metrics` re-exported, whose registry `GET /metrics` encodes.
//! - [`state`]: [`AppState`], what the handlers share (a leaf: it imports no handler);
//!   [`router`](mod@router): [`router()`] over it; [`health`]: the process endpoints;
//!   [`limits`]: the body and time limits; [`v1`]: the ledger API.
//! - [`ui`]: the device page (`GET /`, `GET /ui/`), compiled in, reading the `/v1` routes.
//! - [`capacity`]: the partitions and shares the `v1` mirror publishes, shown beside the
//!   ledger's counts.
//! - [`auth`]: the bearer token; [`reconciler`]: the hook the controller provides.
//! - [`readiness`]: the flags behind `/readyz`.
//! - [`forward`]: `/v1` answered from the leader's ledger, forwarded there by a standby, and the
//!   headers naming the replica that answered.
//! - [`client_layer`]: a tower layer counting Kubernetes API requests.
//!
//! Depends on `dra-allocator` (the ledger's views, cordon calls and commit statistics) and
//! `dra-metrics` (the registry) and on no other crate of the workspace; the controller plugs in
//! through [`Metrics`], [`Readiness`] and [`Reconciler`].

pub mod auth;
pub mod capacity;
pub mod client_layer;
pub mod cordon;
mod error;
mod error_response;
pub mod forward;
pub mod health;
pub mod limits;
pub mod readiness;
pub mod reconciler;
pub mod router;
pub mod state;
pub mod ui;
pub mod v1;

pub use auth::AdminToken;
pub use capacity::{CapacityView, SharedCapacity};
pub use client_layer::{ApiCall, ApiCallLayer, ApiCallSink, ApiRequestsLayer};
pub use cordon::{ClusterCordon, CordonError};
pub use dra_metrics::{self as metrics, Metrics};
pub use error::{Error, Result};
pub use error_response::{ErrorBody, ErrorDetail, ErrorResponse};
pub use forward::{AddressError, Leadership, LedgerTerm, Serving};
pub use readiness::Readiness;
pub use reconciler::Reconciler;
pub use router::router;
pub use state::AppState;
pub use v1::openapi;

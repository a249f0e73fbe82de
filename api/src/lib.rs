//! `dra-api`: the admin HTTP API of dra-ledger and its Prometheus registry.
//!
//! - [`metrics`]: every metric of the product in one module, in its own registry.
//! - [`router`]: the axum router (`/healthz`, `/readyz`, `/metrics`) over an [`AppState`].
//! - [`readiness`]: the flags behind `/readyz`.
//! - [`client_layer`]: a tower layer counting Kubernetes API requests.
//!
//! Depends on `dra-allocator` (the ledger's read views and commit statistics) and on no other
//! crate of the workspace; the controller plugs in through [`Metrics`] and [`Readiness`].

pub mod client_layer;
mod error;
pub mod metrics;
pub mod readiness;
pub mod router;

pub use client_layer::ApiRequestsLayer;
pub use error::{Error, Result};
pub use metrics::Metrics;
pub use readiness::Readiness;
pub use router::{router, ApiError, AppState};

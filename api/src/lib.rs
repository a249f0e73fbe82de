//! `dra-api`: the admin HTTP API of dra-ledger and its Prometheus registry.
//!
//! Endpoints of [`router()`] (JSON unless noted; the OpenAPI 3 document lists the same):
//!
//! | method and path | what | token |
//! |---|---|---|
//! | `GET /healthz` | 200 while the process serves requests | |
//! | `GET /readyz` | 200 once ledger open, caches synced, initial reconcile done; else 503 | |
//! | `GET /metrics` | Prometheus text format | |
//! | `GET /v1/openapi.json` | the OpenAPI 3 document of this API | |
//! | `GET /v1/nodes` | per node: devices total, free, allocated, shared, cordoned, missing | |
//! | `GET /v1/nodes/{node}/devices` | each device with attributes, state and consumer claims | |
//! | `GET /v1/claims?namespace=&node=&limit=&continue=` | allocations by claim UID, paged | |
//! | `GET /v1/claims/{uid}` | a claim's allocation and intent history | |
//! | `GET /v1/intents` | intents not yet resolved | |
//! | `GET /v1/audit?since=&limit=` | the audit log after a sequence number | |
//! | `GET /v1/utilisation` | totals and per attribute value | |
//! | `POST /v1/nodes/{node}/devices/{device}/cordon` | take a device out of allocation | yes |
//! | `POST /v1/nodes/{node}/devices/{device}/uncordon` | put it back | yes |
//! | `POST /v1/reconcile` | reconcile now, return the drift report | yes |
//! | `GET /v1/backup` | a consistent copy of the ledger file (octet stream) | yes |
//!
//! Errors are `{"error": {"code": "...", "message": "..."}}`: 400 bad input (query, paging
//! token, body), 401 missing or wrong bearer token, 403 token endpoints while no token is
//! configured, 404 unknown route, node, device or claim, 409 a reconcile already running, 413
//! body over 64 KiB, 503 not ready or timed out, 500 with a generic message (the cause is
//! logged).
//!
//! Modules:
//! - [`metrics`]: every metric of the product in one module, in its own registry.
//! - [`router`]: [`AppState`], [`router()`] and the process endpoints; [`v1`]: the ledger API.
//! - [`auth`]: the bearer token; [`reconciler`]: the hook the controller provides.
//! - [`readiness`]: the flags behind `/readyz`.
//! - [`client_layer`]: a tower layer counting Kubernetes API requests.
//!
//! Depends on `dra-allocator` (the ledger's views, cordon calls and commit statistics) and on no
//! other crate of the workspace; the controller plugs in through [`Metrics`], [`Readiness`] and
//! [`Reconciler`].

mod api_error;
pub mod auth;
pub mod client_layer;
mod error;
pub mod metrics;
pub mod readiness;
pub mod reconciler;
pub mod router;
pub mod v1;

pub use api_error::{ApiError, ErrorBody, ErrorDetail};
pub use auth::AdminToken;
pub use client_layer::ApiRequestsLayer;
pub use error::{Error, Result};
pub use metrics::Metrics;
pub use readiness::Readiness;
pub use reconciler::Reconciler;
pub use router::{router, AppState};
pub use v1::openapi;

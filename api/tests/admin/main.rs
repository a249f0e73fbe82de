//! The admin API's tests in one binary, all in process through `tower::ServiceExt::oneshot`: the
//! router, the read and write routes, authentication of every route, the OpenAPI document, the
//! metrics and their breakdowns, and property tests of bad input.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod support;

mod auth_every_route;
mod forward;
mod input_props;
mod metrics;
mod metrics_breakdown;
mod openapi;
mod router;
mod ui;
mod v1_admin_access;
mod v1_capacity;
mod v1_health;
mod v1_history;
mod v1_idle;
mod v1_read;
mod v1_write;

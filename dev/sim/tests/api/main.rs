//! The simulated API server as clients see it, in one binary: CRUD, status, delete, lists, watches,
//! custom resources, request options, faults, scale and garbage collection over real HTTP, and the
//! official clients (kube-rs, kubectl, the Kubernetes Python client).

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod api_support;
mod raw_http;

mod admin_access;
mod crd;
mod crud;
mod delete;
mod faults;
mod gc_owner_references;
mod kubectl;
mod kubectl_releases;
mod list;
mod official_client;
mod protobuf;
mod python_conformance;
mod releases;
mod request_options;
mod scale;
mod status;
mod v1;
mod watch;

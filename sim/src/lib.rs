//! `dra-sim`: a simulated Kubernetes 1.30 cluster for tests, benchmarks and the demo.
//!
//! [`server`] is an API server subset speaking the real REST protocol over loopback HTTP;
//! [`actors`] are the control-plane components (scheduler DRA plugin, resourceclaim controller,
//! garbage collector, kubelet) running as API clients against it; [`cluster`] assembles both.
//! This crate depends on no other crate of the workspace.

pub mod actors;
pub mod cluster;
pub mod server;

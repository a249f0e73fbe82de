//! `dra-sim`: a simulated Kubernetes 1.30 (`v1alpha2`) or 1.34 (`v1`) cluster for
//! tests, benchmarks and the demo ([`KubernetesVersion`]).
//!
//! [`server`] is an API server subset speaking the real REST protocol over loopback HTTP;
//! [`actors`] are the control-plane components (scheduler DRA plugin, resourceclaim controller,
//! garbage collector, kubelet) running as API clients against it; [`cluster`] assembles both.
//! Of the workspace it uses `dra-framework` (process helpers) and `dra-node` (only the generated
//! gRPC clients and messages of the kubelet plugin interfaces, which the simulated kubelet calls);
//! neither depends on this crate.

pub mod actors;
pub mod cluster;
pub mod server;
pub mod version;

pub use version::KubernetesVersion;

//! `dra-sim`: a simulated Kubernetes 1.30 (`v1alpha2`) or 1.34 to 1.37 (`v1`) cluster for
//! tests, benchmarks and the demo ([`KubernetesVersion`]).
//!
//! [`server`] is an API server subset speaking the real REST protocol over loopback HTTP;
//! [`actors`] are the control-plane components (scheduler DRA plugin, resourceclaim controller,
//! garbage collector, kubelet) running as API clients against it; [`cluster`] assembles both.
//! Of the workspace it uses `dra-types` (the `resource.k8s.io/v1` objects and the kubelet's
//! generated gRPC code) and `dra-runtime` (work queue, informers, lock policy); no product crate.
//!
//! The public surface is what the controller's demo and tests, the node agent's tests and this
//! crate's tests use: [`cluster`] (start, shape, handle, `sim` flags), [`server`], the actors'
//! [`actors::Actors`] with its configuration and the few names of [`actors::kubelet`] and
//! [`actors::plugins`] those tests read; the rest is crate-private.

pub mod actors;
pub mod cluster;
mod release;
pub mod server;
mod version;

pub use release::{
    ApiOverrides, ApiSelectionError, FeatureGate, FeatureGateSettings, FeatureGates, RuntimeConfig,
    ServedApi,
};
pub use version::{KubernetesVersion, UnsupportedVersion};

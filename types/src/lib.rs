//! `dra-types`: the Kubernetes DRA API as every other crate of the workspace speaks it, defined
//! once at the bottom of the crate graph.
//!
//! - [`resource_v1`]: the one model of the `resource.k8s.io/v1` objects (Kubernetes 1.34+), which
//!   `k8s-openapi`'s `v1_30` feature does not have; the `v1alpha2` objects come from
//!   `k8s-openapi` itself;
//! - [`kubelet`]: the kubelet's plugin gRPC interfaces (registration, the 1.30 `v1alpha3.Node`,
//!   the 1.34+ `v1beta1` and `v1` `DRAPlugin`), generated from `proto/` by `build.rs`;
//! - [`api_mode`]: which of the two generations a cluster serves (`--dra-api`), decided by API
//!   discovery.
//!
//! Types and the probe only: no behaviour of the agent, the controller or the simulator lives
//! here, and this crate depends on no other crate of the workspace.

pub mod api_mode;
pub mod kubelet;
pub mod resource_v1;

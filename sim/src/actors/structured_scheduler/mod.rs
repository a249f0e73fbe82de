//! The kube-scheduler of Kubernetes 1.34 with the `DynamicResources` plugin (structured DRA).

pub mod allocator;
pub mod cel_env;
pub mod quantity;
pub mod semver_lib;

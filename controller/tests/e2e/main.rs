//! End to end in process: the simulated cluster, the driver and the framework's controller with
//! pods of claim templates (lifecycle, placement, restarts on the same ledger, idle
//! allocations, node agents
//! preparing the claims, on 1.30 and on 1.34, where the simulated kube-scheduler allocates from
//! the agents' slices, and the controller there only mirrors the cluster into its ledger), and
//! the manifests under deploy/ (schemas, RBAC against the requests
//! actually made, the flags of the `StatefulSet` and of the node agent's `DaemonSet`, who
//! reaches the admin port).

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod deploy_support;
mod e2e_support;
mod v1_support;

mod deploy_admin_access;
mod deploy_manifests;
mod deploy_node;
mod deploy_nvidia;
mod deploy_releases;
mod deploy_v1;
mod idle;
mod lifecycle;
mod migration;
mod node_agents;
mod placement;
mod v1_cordon;
mod v1_example_sharing;
mod v1_example_taints;
mod v1_examples;
mod v1_health;
mod v1_mirror;
mod v1_mirror_health;
mod v1_node;
mod v1_schedule;
mod v1_sharing;

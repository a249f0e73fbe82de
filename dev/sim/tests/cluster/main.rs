//! The simulated control plane: the scheduler's and kubelet's actors, the DRA scenarios with a
//! scripted driver, the kubelet driving a real node agent over its plugin sockets, and the 1.34
//! actors with fake plugins and the 1.34 scheduler, and device taints in 1.37 (scheduler and eviction controller).

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod fake_plugin;
mod scenario_driver;
mod support;

mod admin_access_v1;
mod device_taints;
mod extended_v1;
mod kubelet_plugins;
mod scenario_dra;
mod scheduling;
mod scheduling_v1;
mod sharing_v1;
mod v1;

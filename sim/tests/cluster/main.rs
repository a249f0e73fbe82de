//! The simulated control plane: the scheduler's and kubelet's actors, and the DRA scenarios with a
//! scripted driver.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod scenario_driver;

mod scenario_dra;
mod scheduling;

//! The agent's kubelet plugin as a 1.30 and as a 1.34 kubelet see it: a gRPC client built from
//! the same `.proto` files calls the registration and `v1alpha3.Node` services over the Unix
//! sockets the agent creates in a temporary kubelet directory. The preparer behind the 1.30
//! service is a fake (`support::FakePreparer`), except in `journal`, where the real journal and
//! CDI directory answer bad input. The `v1_` modules run the whole agent against the
//! simulator's API server playing 1.34 (`v1_support`) and call `v1.DRAPlugin` and
//! `v1beta1.DRAPlugin` with claims allocated in it; `v1_slices` checks the node's slice the agent
//! publishes there (`v1_sharing_slices` the pool of shared devices on 1.37 and 1.35), `v1_status` the device status it writes into the claims it prepares.

#![allow(clippy::unwrap_used, missing_docs)]

mod authority;
// the fake sysfs of the discovery tests, for the slices published from it; this crate uses part
// of it
#[allow(dead_code)]
#[path = "../discovery/fake_sysfs.rs"]
mod fake_sysfs;
mod journal;
#[path = "../common/opaque.rs"]
mod opaque;
mod prepare;
mod registration;
mod resources;
mod sockets;
mod support;
mod v1_health;
mod v1_prepare;
mod v1_registration;
mod v1_sharing_slices;
mod v1_slices;
mod v1_status;
mod v1_support;
#[path = "../v1/validate.rs"]
mod validate;
mod wire;

//! The agent's kubelet plugin as a 1.30 kubelet sees it: a gRPC client built from the same
//! `.proto` files calls the registration and `v1alpha3.Node` services over the Unix sockets the
//! agent creates in a temporary kubelet directory. The preparer behind the service is a fake
//! (`support::FakePreparer`), except in `journal`, where the real journal and CDI directory
//! answer bad input.

#![allow(clippy::unwrap_used, missing_docs)]

mod journal;
mod prepare;
mod registration;
mod resources;
mod sockets;
mod support;
mod wire;

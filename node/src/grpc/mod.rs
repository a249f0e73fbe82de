//! The kubelet's gRPC interfaces over Unix sockets: the registration service the kubelet's
//! plugin watcher finds in its registry directory, and the Kubernetes 1.30 `v1alpha3.Node`
//! service on the plugin socket.
//!
//! - [`proto`]: the generated messages, servers and clients (`node/proto/`);
//! - [`versions`]: how a 1.30 kubelet reads `supported_versions`.
//!
//! The service knows the prepare contract only ([`crate::prepare`]), never the journal or CDI
//! files behind it.

pub mod proto;
pub mod versions;

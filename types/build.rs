//! Compiles the kubelet's plugin interfaces from `proto/` (registration, the 1.30 `v1alpha3`
//! service, the 1.34+ `v1beta1` and `v1` services and the `v1alpha1` health service) with a pure-Rust protobuf compiler, so
//! that a build needs no system `protoc`. Server and client code are generated: the agent serves
//! them, the tests and the simulated kubelet call them. The clients take any transport (the
//! kubelet's sockets are Unix sockets), so no `connect` constructor for TCP channels is emitted.

use std::path::Path;

const PROTOS: &[&str] = &[
    "proto/pluginregistration/v1/api.proto",
    "proto/dra/v1alpha3/api.proto",
    "proto/dra/v1beta1/api.proto",
    "proto/dra/v1/api.proto",
    "proto/dra-health/v1alpha1/api.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(PROTOS, [Path::new("proto")])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .include_file("protos.rs")
        .compile_fds(fds)?;
    Ok(())
}

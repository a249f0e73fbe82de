//! Device discovery from the outside: fake sysfs trees of real machines (built by
//! [`fake_sysfs`]), inventory files, the NVML mapping over a fake library (with MIG partitions
//! and capacity sharing), and the parsing of the `--devices` flag.

// Test support unwraps too: a fixture that cannot be built is a failed test.
#![allow(clippy::unwrap_used)]

mod fake_sysfs;
mod file;
mod file_sharing;
mod nvml;
mod nvml_sharing;
mod source;
mod sysfs;

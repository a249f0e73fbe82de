//! Device discovery from the outside: fake sysfs trees of real machines (built by
//! [`fake_sysfs`]), inventory files, the NVML mapping over a fake library, and the parsing of
//! the `--devices` flag.

// Test support unwraps too: a fixture that cannot be built is a failed test.
#![allow(clippy::unwrap_used)]

mod fake_sysfs;
mod file;
mod file_sharing;
mod nvml;
mod source;
mod sysfs;

//! The possible placements of one MIG (GPU-instance) profile on a GPU, read through NVML's C
//! function `nvmlDeviceGetGpuInstancePossiblePlacements_v2` itself.
//!
//! `nvml-wrapper` 0.13's `Device::possible_placements` sizes its buffer but never sets the
//! vector's length, so it always answers an empty list, and a MIG GPU would publish no
//! partitions. This module is the agent's only unsafe code; it calls the same function through
//! the wrapper's loaded library with a buffer of initialised entries. It goes when a release of
//! the wrapper answers correctly.
#![allow(unsafe_code)]

use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{nvmlGpuInstancePlacement_t, nvmlReturn_enum_NVML_SUCCESS};
use std::os::raw::c_uint;

/// `(start, size)` in memory slices of every placement NVML allows for GPU-instance profile
/// `profile` on `device`, in NVML's order; `None` when the library lacks the function or
/// answers an error (a profile the GPU does not support).
pub(super) fn possible_placements(device: &Device<'_>, profile: u32) -> Option<Vec<(u32, u32)>> {
    let call = device
        .nvml()
        .lib()
        .nvmlDeviceGetGpuInstancePossiblePlacements_v2
        .as_ref()
        .ok()?;
    // SAFETY: `handle` is the handle NVML gave for `device`, valid while the borrowed `Nvml`
    // stays open, which the borrow guarantees. The first call is NVML's documented way to ask
    // for the count (a null buffer; only `count` is written). The second gets a buffer of
    // `capacity` initialised entries and `count == capacity`, so NVML writes at most that many
    // and sets `count` to the number written; the buffer is cut to it, never grown.
    unsafe {
        let handle = device.handle();
        let mut count: c_uint = 0;
        if call(handle, profile, std::ptr::null_mut(), &raw mut count)
            != nvmlReturn_enum_NVML_SUCCESS
        {
            return None;
        }
        let capacity = count;
        let mut buffer = vec![nvmlGpuInstancePlacement_t { start: 0, size: 0 }; capacity as usize];
        if call(handle, profile, buffer.as_mut_ptr(), &raw mut count)
            != nvmlReturn_enum_NVML_SUCCESS
        {
            return None;
        }
        buffer.truncate(count.min(capacity) as usize);
        Some(buffer.iter().map(|p| (p.start, p.size)).collect())
    }
}

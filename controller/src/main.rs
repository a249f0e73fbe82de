//! `dra-ledger`: the DRA driver for GPUs with a durable device ledger, on `v1alpha2` and `v1`.
//!
//! The command line ([`cli`]: flags, subcommands, logging, exit codes) is part of this binary,
//! not of the `dra_controller` library, which it drives.

// Kubernetes kind names are prose in these docs, not code identifiers.
#![allow(clippy::doc_markdown)]

mod cli;

/// Every command of the binary allocates through mimalloc (see the workspace's Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's option numbers (`mi_option_t` in mimalloc 3's `mimalloc.h`), which
/// libmimalloc-sys does not name for mimalloc 3.
mod mi_option {
    use libmimalloc_sys::mi_option_t;
    /// How many milliseconds freed memory is kept before it goes back to the system.
    pub(crate) const PURGE_DELAY: mi_option_t = 15;
}

/// How long freed memory stays with the allocator before it goes back to the system, in
/// milliseconds, instead of mimalloc 3's 1000. A start (every claim listed, decoded and
/// dropped, on several threads) frees and allocates hundreds of megabytes within a second;
/// kept for a second, the freed pages stay resident while other threads touch new ones, and a
/// restart on a large ledger peaked at a sixth more memory. A shorter delay returns memory
/// sooner but costs CPU in steady work, as pages freed between two allocations are faulted
/// back in: in runs side by side, the CPU per allocated claim was 1.49-1.52 ms at 1000 ms,
/// 1.54 ms at 100 ms and 1.61 ms at 10 ms (docs/performance.md).
const PURGE_DELAY_MS: std::os::raw::c_long = 100;

/// Sets the allocator's purge delay, unless the `MIMALLOC_PURGE_DELAY` environment variable
/// sets it. The long-running commands (`run`, `node`) call it first; the simulator and the demo
/// keep mimalloc's default, trading memory for CPU.
#[allow(unsafe_code)]
pub(crate) fn tune_allocator() {
    // SAFETY: setting an option's default value has no precondition; mimalloc reads its
    // options as plain words, and this one only decides when freed memory is returned to the
    // system.
    unsafe {
        libmimalloc_sys::mi_option_set_default(mi_option::PURGE_DELAY, PURGE_DELAY_MS);
    }
}

fn main() -> std::process::ExitCode {
    cli::main()
}

#[cfg(test)]
mod tests {
    use super::{mi_option, tune_allocator, PURGE_DELAY_MS};

    /// The option number names the purge delay: it reads mimalloc 3's default, then what the
    /// binary sets.
    #[test]
    #[allow(unsafe_code)]
    fn the_purge_delay_is_the_option_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reading an option has no precondition.
        let read = || unsafe { libmimalloc_sys::mi_option_get(mi_option::PURGE_DELAY) };
        assert_eq!(read(), 1000);
        tune_allocator();
        assert_eq!(read(), PURGE_DELAY_MS);
    }
}

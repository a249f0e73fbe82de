//! `dra-ledger`: the classic DRA driver controller with a durable device ledger.
//!
//! The command line ([`cli`]: flags, subcommands, logging, exit codes) is part of this binary,
//! not of the `dra_controller` library, which it drives.

// Kubernetes kind names are prose in these docs, not code identifiers.
#![allow(clippy::doc_markdown)]

mod cli;

/// Every command of the binary allocates through mimalloc (see the workspace's Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}

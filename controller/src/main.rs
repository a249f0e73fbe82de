//! `dra-ledger`: the classic DRA driver controller with a durable device ledger.
//!
//! The command line ([`cli`]: flags, subcommands, logging, exit codes) is part of this binary,
//! not of the `dra_controller` library, which it drives.

// Kubernetes kind names are prose in these docs, not code identifiers.
#![allow(clippy::doc_markdown)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

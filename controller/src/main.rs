//! `dra-ledger`: the classic DRA driver controller with a durable device ledger.
//!
//! Thin entry point; the subcommands live in `dra_controller::cli`.

fn main() -> std::process::ExitCode {
    dra_controller::cli::main()
}

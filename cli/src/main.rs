//! `railyard`: the project's command line (clap derive). The help texts
//! are the doc comments of the argument structs: `railyard_sim::cli::SimArgs`
//! for `railyard sim`, [`bench::BenchArgs`] for `railyard bench`; the
//! README quotes `--help` and a test keeps the two in step.
#![deny(missing_docs)]

mod bench;
mod error;
mod int_in;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// railyard: the hot path of an RDMA transfer engine, its simulator and its benchmark.
#[derive(Debug, Parser)]
#[command(name = "railyard", version, propagate_version = true, term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    // The help of each command is the doc comment of its argument struct.
    #[cfg(feature = "sim")]
    Sim(railyard_sim::cli::SimArgs),
    Bench(bench::BenchArgs),
}

/// Installs the log subscriber: the engine's control-path lines
/// (`railyard::handshake`, `::endpoint`, `::qp`, `::reconnect`, `::cc`,
/// `::event`, `::config`) on stderr, filtered by `RUST_LOG` (e.g.
/// `RUST_LOG=railyard=info`); without it, or with a filter that does not
/// parse, only errors (the engine logs none, so nothing changes on
/// stdout or stderr).
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return error::exit_with(&e, &args),
    };
    match cli.command {
        #[cfg(feature = "sim")]
        Command::Sim(a) => {
            let code = railyard_sim::cli::run(&a, &mut std::io::stdout(), &mut std::io::stderr());
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Command::Bench(a) => bench::main(a),
    }
}

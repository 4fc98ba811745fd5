//! `railyard`: the project's command line. A thin dispatcher: each
//! subcommand lives in its own module and parses its own arguments.
//!
//! ```text
//! railyard sim <scenario>|all [options] # the deterministic fabric simulator
//! railyard bench target    [options]   # serve memory for a benchmark peer
//! railyard bench initiator [options]   # drive READ/WRITE traffic and report
//! ```
#![deny(missing_docs)]

mod bench;

use std::process::ExitCode;

const USAGE: &str = "usage: railyard <command> [args]

commands:
  sim      deterministic fabric simulator driving the real core:
           `railyard sim <incast|slowdown|cc|peer-feedback|all>
           [--senders N] [--seed S] [--json] [--plot FILE]`
  bench    RDMA READ/WRITE benchmark over the railyard engine
           (like ib_write_bw / Mooncake transfer_engine_bench;
           needs the `verbs` feature). `railyard bench --help`.
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("sim") => {
            let args: Vec<String> = args.collect();
            let code = railyard_sim::cli_main(&args);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Some("bench") => bench::main(args.collect()),
        Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprint!("railyard: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprint!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

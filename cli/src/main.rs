//! `railyard`: the project's command line. A thin dispatcher: each
//! subcommand lives in its own module and parses its own arguments.
//!
//! ```text
//! railyard bench target    [options]   # serve memory for a benchmark peer
//! railyard bench initiator [options]   # drive READ/WRITE traffic and report
//! ```
#![deny(missing_docs)]

mod bench;

use std::process::ExitCode;

const USAGE: &str = "usage: railyard <command> [args]

commands:
  bench    RDMA READ/WRITE benchmark over the railyard engine
           (like ib_write_bw / Mooncake transfer_engine_bench;
           needs the `verbs` feature). `railyard bench --help`.
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
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

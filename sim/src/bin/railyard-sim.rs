//! `railyard-sim`: the scenario runner (the lead wires `railyard sim` to
//! [`railyard_sim::cli_main`]).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(railyard_sim::cli_main(&args));
}

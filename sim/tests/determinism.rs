//! Same seed → byte-identical output (tables, JSON, SVG); another seed →
//! different output (the seed is actually used).

use clap::Parser as _;
use railyard_sim::cli::SimArgs;
use railyard_sim::plot::render_svg;
use railyard_sim::scenario::{self, Opts, ALL};

fn render(name: &str, seed: u64) -> String {
    let o = Opts {
        seed,
        duration_ms: Some(20),
        ..Opts::default()
    };
    let out = scenario::run(name, &o).expect("known scenario");
    let mut s = out.render();
    s.push_str(&out.to_json(&o).to_string());
    s.push('\n');
    s.push_str(&render_svg(&out.figure).expect("every scenario plots something"));
    s
}

#[test]
fn same_seed_same_bytes_for_every_scenario() {
    for name in ALL {
        let a = render(name, 7);
        let b = render(name, 7);
        assert!(!a.is_empty());
        assert_eq!(a, b, "scenario {name} is not deterministic");
    }
}

#[test]
fn the_seed_changes_the_run() {
    // Jitter and arrival times come from the seed: some figure moves.
    assert_ne!(render("incast", 1), render("incast", 2));
    assert_ne!(render("peer-feedback", 1), render("peer-feedback", 2));
}

#[test]
fn cli_json_output_is_reproducible() {
    let run = |args: &str| {
        let a =
            SimArgs::try_parse_from(std::iter::once("railyard sim").chain(args.split_whitespace()))
                .expect("valid arguments");
        let (mut out, mut err) = (vec![], vec![]);
        let code = railyard_sim::cli::run(&a, &mut out, &mut err);
        (code, String::from_utf8(out).expect("utf-8"))
    };
    let a = run("incast --senders 4 --seed 3 --duration-ms 10 --json");
    assert_eq!(
        a,
        run("incast --senders 4 --seed 3 --duration-ms 10 --json")
    );
    assert_eq!(a.0, 0);
    let j: serde_json::Value = serde_json::from_str(a.1.trim()).expect("one JSON document");
    assert_eq!(j["ok"], true);
    assert_eq!(j["seed"], 3);
    assert!(j["checks"].as_array().expect("checks").len() > 3);
}

//! `peer-feedback`: RFC 4534's two-peer experiment.

use super::{Opts, Outcome};

/// Runs baseline, V1, V2, V3.
pub fn run(_o: &Opts) -> Outcome {
    let mut out = Outcome::new("peer-feedback");
    out.missing
        .push("rail selector (core::rail, issue #5) is not on main yet".into());
    out.summary = "not evaluated: core::rail missing".into();
    out
}

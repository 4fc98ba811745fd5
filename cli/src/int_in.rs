//! [`int_in`]: the integer value parser of `railyard bench`'s flags.
//!
//! `railyard sim`'s flags use the simulator's own,
//! `railyard_sim::cli::int_in`; this copy is here because `railyard bench`
//! must parse its flags in a build without the simulator (the
//! compiled-out-controller build, `--no-default-features --features
//! verbs`, must not link railyard-sim, which turns the controller on in
//! railyard-core). A test checks that both accept and refuse the same
//! input with the same words.

/// A value parser for an integer in `min..=max` whose errors say which:
/// `not a number` or `out of range`.
pub fn int_in(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync {
    move |s: &str| {
        let t = s.trim();
        match t.parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            Ok(_) => Err(format!("out of range: expected {min}..={max}")),
            Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                Err(format!("out of range: expected {min}..={max}"))
            }
            Err(_) if t.starts_with('-') && t[1..].bytes().all(|b| b.is_ascii_digit()) => {
                Err(format!("out of range: expected {min}..={max}"))
            }
            Err(_) => Err(format!(
                "not a number: expected an integer in {min}..={max}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::int_in;

    #[test]
    fn words_and_bounds() {
        let p = int_in(1, 256);
        assert_eq!(p("16"), Ok(16));
        assert_eq!(p(" 256 "), Ok(256));
        assert!(p("0").unwrap_err().starts_with("out of range"));
        assert!(p("257").unwrap_err().starts_with("out of range"));
        assert!(p("-3").unwrap_err().starts_with("out of range"));
        assert!(p("99999999999999999999999")
            .unwrap_err()
            .starts_with("out of range"));
        assert!(p("x").unwrap_err().starts_with("not a number"));
        assert!(p("").unwrap_err().starts_with("not a number"));
    }

    /// `railyard bench` and `railyard sim` parse integers alike.
    #[test]
    fn same_as_the_simulators() {
        for (min, max) in [(0, 255), (1, 64), (1, 1 << 40), (1, 65535)] {
            let ours = int_in(min, max);
            let sims = railyard_sim::cli::int_in(min, max);
            for s in [
                "",
                " ",
                "0",
                "1",
                "64",
                "65",
                "255",
                "256",
                "65535",
                "65536",
                "-1",
                "-",
                "+1",
                "1.0",
                "0x10",
                " 7 ",
                "1e3",
                "abc",
                "18446744073709551615",
                "18446744073709551616",
                "99999999999999999999999",
                "-99999999999999999999",
            ] {
                assert_eq!(ours(s), sims(s), "{s:?} in {min}..={max}");
            }
        }
    }
}

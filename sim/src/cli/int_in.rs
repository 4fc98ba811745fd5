//! [`int_in`]: the integer value parser of `railyard sim`'s flags.
//! `railyard bench` has the same parser in the CLI crate (it must build
//! without the simulator); a test there checks that the two agree.

/// A value parser for an integer in `min..=max` whose errors say which:
/// `not a number` or `out of range`.
///
/// ```
/// let p = railyard_sim::cli::int_in(1, 256);
/// assert_eq!(p("16"), Ok(16));
/// assert!(p("0").unwrap_err().starts_with("out of range"));
/// assert!(p("99999999999999999999999").unwrap_err().starts_with("out of range"));
/// assert!(p("x").unwrap_err().starts_with("not a number"));
/// ```
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

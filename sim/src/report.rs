//! Output: RFC-shaped text tables and the statistics the RFCs report
//! (nearest-rank percentiles, Jain fairness). JSON goes through serde (the
//! scenario rows, [`crate::scenario::Outcome::to_json`]); plots through
//! [`crate::plot`].
//!
//! Everything here is deterministic: fixed float formatting, stable order.

use std::fmt::Write as _;

/// A text table in the RFCs' shape: a title, a header row, rows, notes.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Title line.
    pub title: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows (each as long as `headers`).
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table.
    pub notes: Vec<String>,
}

impl Table {
    /// A table with `title` and `headers`.
    pub fn new(title: &str, headers: &[&str]) -> Table {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: vec![],
            notes: vec![],
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders with aligned columns (first column left, others right).
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        let line = |out: &mut String, r: &[String]| {
            for (i, c) in r.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    out.push_str(c);
                    out.push_str(&" ".repeat(pad));
                } else {
                    out.push_str("  ");
                    out.push_str(&" ".repeat(pad));
                    out.push_str(c);
                }
            }
            out.push('\n');
        };
        line(&mut out, &self.headers);
        let total: usize = w.iter().sum::<usize>() + 2 * (n.saturating_sub(1));
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            line(&mut out, r);
        }
        for note in &self.notes {
            let _ = writeln!(out, "  {note}");
        }
        out
    }
}

/// Nearest-rank percentile `p` (0..=100) of `v` (sorted copy); 0 if empty:
/// the smallest sample with at least `p`% of the samples at or below it
/// (rank `ceil(p/100 * n)`, at least 1). This is the project's one
/// percentile definition: `railyard bench` reports the same quantity
/// through an HDR histogram (3 significant digits), which returns the top
/// of the bucket holding that rank.
///
/// ```
/// use railyard_sim::report::percentile;
/// let v: Vec<u64> = (1..=1000).collect();
/// assert_eq!(percentile(&v, 50.0), 500);
/// assert_eq!(percentile(&v, 99.9), 999);
/// ```
pub fn percentile(v: &[u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    // p/100 × n, less a relative hair: 99.9/100 × 2000 is 1998.0000000000002
    // in floating point and must be rank 1998, not 1999.
    let x = (p / 100.0) * s.len() as f64;
    let rank = (x - x * 1e-12).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// Jain's fairness index of `x` (1.0 = perfectly fair; 1.0 for empty).
pub fn jain(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        1.0
    } else {
        s * s / (n * q)
    }
}

/// Relative change `(b - a) / a` in percent (0 if `a` is 0).
pub fn delta_pct(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        0.0
    } else {
        (b - a) / a * 100.0
    }
}

/// Formats ns as µs with one decimal.
pub fn us(ns: f64) -> String {
    format!("{:.1} us", ns / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank_and_jain() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[5], 99.0), 5);
        assert_eq!(percentile(&[], 99.0), 0);
        let w: Vec<u64> = (1..=2000).collect();
        assert_eq!(percentile(&w, 99.9), 1998);
        assert_eq!(percentile(&w[..1000], 99.0), 990);
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new("T", &["a", "bb"]);
        t.row(vec!["xyz".into(), "1".into()]);
        assert_eq!(t.render(), "T\na    bb\n-------\nxyz   1\n");
    }
}

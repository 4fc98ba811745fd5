//! Output: RFC-shaped text tables, JSON lines, SVG time series, and the
//! statistics the RFCs report (nearest-rank P99, Jain fairness).
//!
//! Everything here is deterministic: fixed float formatting, stable order.

use std::fmt::Write as _;

use crate::model::Series;

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

/// A JSON value for the hand-written JSON-lines writer.
#[derive(Clone, Debug, PartialEq)]
pub enum J {
    /// A string.
    S(String),
    /// An integer.
    I(i128),
    /// A float, written with 6 decimals (deterministic).
    F(f64),
    /// A boolean.
    B(bool),
}

/// One JSON object, keys in insertion order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonLine(pub Vec<(String, J)>);

impl JsonLine {
    /// A line starting with `"scenario": name`.
    pub fn new(scenario: &str) -> JsonLine {
        JsonLine(vec![("scenario".into(), J::S(scenario.into()))])
    }
    /// Adds a string field.
    pub fn s(mut self, k: &str, v: &str) -> Self {
        self.0.push((k.into(), J::S(v.into())));
        self
    }
    /// Adds an integer field.
    pub fn i(mut self, k: &str, v: impl Into<i128>) -> Self {
        self.0.push((k.into(), J::I(v.into())));
        self
    }
    /// Adds a float field.
    pub fn f(mut self, k: &str, v: f64) -> Self {
        self.0.push((k.into(), J::F(v)));
        self
    }
    /// Adds a boolean field.
    pub fn b(mut self, k: &str, v: bool) -> Self {
        self.0.push((k.into(), J::B(v)));
        self
    }
    /// Serializes to one line.
    pub fn render(&self) -> String {
        let mut o = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            o.push_str(&esc(k));
            o.push(':');
            match v {
                J::S(s) => o.push_str(&esc(s)),
                J::I(n) => {
                    let _ = write!(o, "{n}");
                }
                J::F(f) if f.is_finite() => {
                    let _ = write!(o, "{f:.6}");
                }
                J::F(_) => o.push_str("null"),
                J::B(b) => {
                    let _ = write!(o, "{b}");
                }
            }
        }
        o.push('}');
        o
    }
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Nearest-rank percentile `p` (0..=100) of `v` (sorted copy); 0 if empty.
pub fn percentile(v: &[u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
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

/// Writes an SVG with one panel per series (shared time axis).
pub fn svg(title: &str, series: &[Series]) -> String {
    let (w, ph, top, left, right) = (900.0f64, 130.0f64, 40.0f64, 70.0f64, 20.0f64);
    let h = top + ph * series.len() as f64 + 30.0;
    let t_max = series
        .iter()
        .flat_map(|s| s.points.last().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let colors = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    ];
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(
        o,
        r#"<rect width="{w}" height="{h}" fill="white"/><text x="{left}" y="20" font-size="14">{}</text>"#,
        xml(title)
    );
    for (i, s) in series.iter().enumerate() {
        let y0 = top + ph * i as f64;
        let (pw, pp) = (w - left - right, ph - 25.0);
        let raw_max = s.points.iter().map(|p| p.1).fold(0.0f64, f64::max);
        let vmax = if raw_max <= 0.0 { 1.0 } else { raw_max * 1.1 };
        let _ = writeln!(
            o,
            r##"<rect x="{left}" y="{y0}" width="{pw}" height="{pp}" fill="none" stroke="#999"/>"##
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}">{} ({}) max {:.2}</text>"#,
            left + 5.0,
            y0 + 12.0,
            xml(&s.name),
            xml(&s.unit),
            raw_max
        );
        let _ = writeln!(
            o,
            r#"<text x="5" y="{}">{:.1}</text><text x="5" y="{}">0</text>"#,
            y0 + 10.0,
            vmax,
            y0 + pp
        );
        let mut pts = String::new();
        for &(t, v) in &s.points {
            let x = left + pw * (t as f64 / t_max);
            let y = y0 + pp - pp * (v / vmax);
            let _ = write!(pts, "{x:.1},{y:.1} ");
        }
        let _ = writeln!(
            o,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.2" points="{}"/>"#,
            colors[i % colors.len()],
            pts.trim_end()
        );
    }
    let _ = writeln!(
        o,
        r#"<text x="{left}" y="{}">0 ms</text><text x="{}" y="{}" text-anchor="end">{:.1} ms</text>"#,
        h - 10.0,
        w - right,
        h - 10.0,
        t_max / 1e6
    );
    o.push_str("</svg>\n");
    o
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn json_escapes_and_formats() {
        let l = JsonLine::new("x\"y").i("n", 3).f("f", 0.5).b("ok", true);
        assert_eq!(
            l.render(),
            r#"{"scenario":"x\"y","n":3,"f":0.500000,"ok":true}"#
        );
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new("T", &["a", "bb"]);
        t.row(vec!["xyz".into(), "1".into()]);
        assert_eq!(t.render(), "T\na    bb\n-------\nxyz   1\n");
    }
}

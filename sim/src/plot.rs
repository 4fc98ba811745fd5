//! Plots: what a scenario wants drawn ([`Figure`]), rendered as SVG with
//! the `plotters` crate.
//!
//! A figure is a column of panels, each with its own title (outside the
//! data), axes with ticks and units, and a legend:
//!
//! * [`Panel::lines`]: time series of the compared arms overlaid on one
//!   scale, with reference lines (a capacity, a target) dashed and shaded
//!   windows (a fault, a slowdown) behind the data;
//! * [`Panel::states`]: a state over time as a labelled band (the RFC 4162
//!   path state), never as a number on a y axis;
//! * [`Panel::stacked_bars`]: shares per arm (100% stacks), e.g. the bytes
//!   of one peer per NIC.
//!
//! Rendering is deterministic (same figure → same bytes). Panels without
//! data are not drawn; a figure with no panel at all is refused.
//!
//! ```
//! use railyard_sim::plot::{Figure, Line, Panel};
//! let mut f = Figure::new("example");
//! f.push(Panel::lines("occupancy", "slots").line(Line::new("fixed", vec![(0.0, 1.0), (1.0, 9.0)])).reference("capacity (8 slots)", 8.0));
//! let svg = railyard_sim::plot::render_svg(&f).unwrap();
//! assert!(svg.contains("capacity (8 slots)"));
//! ```

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of every figure, px.
const WIDTH: u32 = 960;
/// Height of a line or bar panel, px.
const PANEL_H: u32 = 270;
/// Height of a state band panel, px.
const BAND_H: u32 = 140;
/// Height of the figure title strip, px.
const TITLE_H: u32 = 40;
const FONT: &str = "sans-serif";

/// Series colours, in arm order (the first arm is the baseline).
const PALETTE: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
];
/// Shaded windows.
const SHADE: [RGBColor; 3] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
];

/// One time series: `(x, y)` points, x in the panel's unit (ms).
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Legend entry.
    pub label: String,
    /// Points, x ascending.
    pub points: Vec<(f64, f64)>,
}

impl Line {
    /// A line named `label`.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            label: label.into(),
            points,
        }
    }
}

/// A shaded x window, e.g. the time a fault is active.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Legend entry.
    pub label: String,
    /// Start, x units.
    pub from: f64,
    /// End, x units.
    pub to: f64,
}

/// A state that holds over `[from, to)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// State name (label and legend).
    pub state: String,
    /// Start, x units.
    pub from: f64,
    /// End, x units.
    pub to: f64,
}

/// What a panel draws.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// Overlaid lines on one y scale.
    Lines {
        /// The arms.
        lines: Vec<Line>,
        /// Horizontal reference lines `(label, y)`, dashed.
        refs: Vec<(String, f64)>,
        /// Shaded windows behind the data.
        windows: Vec<Window>,
    },
    /// A state band over time.
    States {
        /// The spans, in time order.
        spans: Vec<Span>,
        /// Every state name in legend order, with its colour as RGB.
        palette: Vec<(String, (u8, u8, u8))>,
    },
    /// 100% stacked bars, one bar per category.
    StackedBars {
        /// Bar names (x axis).
        categories: Vec<String>,
        /// `(legend, one share in percent per category)`, bottom first.
        stacks: Vec<(String, Vec<f64>)>,
    },
}

/// One panel of a figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Title above the panel.
    pub title: String,
    /// X axis label, with its unit.
    pub x_label: String,
    /// Y axis label, with its unit.
    pub y_label: String,
    /// X range; `None` = from 0 to the data's end.
    pub x_range: Option<(f64, f64)>,
    /// A logarithmic y axis (lines only; points <= 0 are left out).
    pub log_y: bool,
    /// What is drawn.
    pub body: Body,
}

impl Panel {
    /// A panel of time series (x: time in ms) with y unit `unit`.
    pub fn lines(title: impl Into<String>, unit: impl Into<String>) -> Panel {
        Panel {
            title: title.into(),
            x_label: "time (ms)".into(),
            y_label: unit.into(),
            x_range: None,
            log_y: false,
            body: Body::Lines {
                lines: vec![],
                refs: vec![],
                windows: vec![],
            },
        }
    }

    /// A state band (x: time in ms); `palette` names every state with
    /// its colour, in legend order.
    pub fn states(
        title: impl Into<String>,
        spans: Vec<Span>,
        palette: &[(&str, (u8, u8, u8))],
    ) -> Panel {
        Panel {
            title: title.into(),
            x_label: "time (ms)".into(),
            y_label: String::new(),
            x_range: None,
            log_y: false,
            body: Body::States {
                spans,
                palette: palette.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
            },
        }
    }

    /// 100% stacked bars over `categories`, y in percent.
    pub fn stacked_bars(
        title: impl Into<String>,
        y_label: impl Into<String>,
        categories: Vec<String>,
        stacks: Vec<(String, Vec<f64>)>,
    ) -> Panel {
        Panel {
            title: title.into(),
            x_label: String::new(),
            y_label: y_label.into(),
            x_range: None,
            log_y: false,
            body: Body::StackedBars { categories, stacks },
        }
    }

    /// Adds a line (builder).
    pub fn line(mut self, l: Line) -> Panel {
        if let Body::Lines { lines, .. } = &mut self.body {
            lines.push(l);
        }
        self
    }

    /// Adds a dashed reference line at `y` (builder).
    pub fn reference(mut self, label: impl Into<String>, y: f64) -> Panel {
        if let Body::Lines { refs, .. } = &mut self.body {
            refs.push((label.into(), y));
        }
        self
    }

    /// Adds a shaded window `[from, to)` (builder).
    pub fn window(mut self, label: impl Into<String>, from: f64, to: f64) -> Panel {
        if let Body::Lines { windows, .. } = &mut self.body {
            windows.push(Window {
                label: label.into(),
                from,
                to,
            });
        }
        self
    }

    /// A logarithmic y axis (builder).
    pub fn log_y(mut self) -> Panel {
        self.log_y = true;
        self
    }

    /// Fixes the x range (builder).
    pub fn x_range(mut self, from: f64, to: f64) -> Panel {
        self.x_range = Some((from, to));
        self
    }

    /// Whether the panel has something to draw.
    pub fn has_data(&self) -> bool {
        match &self.body {
            Body::Lines { lines, .. } => lines.iter().any(|l| !l.points.is_empty()),
            Body::States { spans, .. } => !spans.is_empty(),
            Body::StackedBars { categories, stacks } => {
                !categories.is_empty() && !stacks.is_empty()
            }
        }
    }

    fn height(&self) -> u32 {
        match self.body {
            Body::States { .. } => BAND_H,
            _ => PANEL_H,
        }
    }

    fn x_extent(&self) -> (f64, f64) {
        if let Some(r) = self.x_range {
            return r;
        }
        let end = match &self.body {
            Body::Lines { lines, windows, .. } => lines
                .iter()
                .flat_map(|l| l.points.last().map(|p| p.0))
                .chain(windows.iter().map(|w| w.to))
                .fold(0.0, f64::max),
            Body::States { spans, .. } => spans.iter().map(|s| s.to).fold(0.0, f64::max),
            Body::StackedBars { .. } => 1.0,
        };
        (0.0, if end > 0.0 { end } else { 1.0 })
    }
}

/// A titled column of panels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figure {
    /// Title at the top, outside every panel.
    pub title: String,
    /// Panels, top to bottom.
    pub panels: Vec<Panel>,
}

impl Figure {
    /// An empty figure titled `title`.
    pub fn new(title: impl Into<String>) -> Figure {
        Figure {
            title: title.into(),
            panels: vec![],
        }
    }

    /// Appends `p` if it has data (no empty panels).
    pub fn push(&mut self, p: Panel) {
        if p.has_data() {
            self.panels.push(p);
        }
    }
}

/// Why a figure could not be rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotError(pub String);

impl std::fmt::Display for PlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlotError {}

fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

/// Renders `f` as an SVG document. A figure without any panel with data
/// is an error (nothing would be drawn).
pub fn render_svg(f: &Figure) -> Result<String, PlotError> {
    let panels: Vec<&Panel> = f.panels.iter().filter(|p| p.has_data()).collect();
    if panels.is_empty() {
        return Err(PlotError(format!(
            "figure '{}' has no data to plot",
            f.title
        )));
    }
    let height = TITLE_H + panels.iter().map(|p| p.height()).sum::<u32>();
    // One colour per arm across the figure, in order of first appearance.
    let mut arms: Vec<&str> = vec![];
    for p in &panels {
        let labels: Vec<&str> = match &p.body {
            Body::Lines { lines, .. } => lines.iter().map(|l| l.label.as_str()).collect(),
            Body::StackedBars { stacks, .. } => stacks.iter().map(|s| s.0.as_str()).collect(),
            Body::States { .. } => vec![],
        };
        for l in labels {
            if !arms.contains(&l) {
                arms.push(l);
            }
        }
    }
    let colour = |label: &str| {
        let i = arms.iter().position(|a| *a == label).unwrap_or(0);
        PALETTE[i % PALETTE.len()]
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(&f.title, (FONT, 22).into_font().style(FontStyle::Bold))
            .map_err(err)?;
        let mut rest = root;
        for p in panels {
            let (area, below) = rest.split_vertically(p.height());
            match &p.body {
                Body::Lines {
                    lines,
                    refs,
                    windows,
                } => draw_lines(&area, p, lines, refs, windows, &colour)?,
                Body::States { spans, palette } => draw_states(&area, p, spans, palette)?,
                Body::StackedBars { categories, stacks } => {
                    draw_bars(&area, p, categories, stacks, &colour)?
                }
            }
            rest = below;
        }
        rest.present().map_err(err)?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Grid line colours.
const GRID_LIGHT: RGBColor = RGBColor(0xf4, 0xf4, 0xf4);
const GRID_BOLD: RGBColor = RGBColor(0xe0, 0xe0, 0xe0);

/// Every panel's frame: its title above, room for the axis labels.
fn builder<'a, 'b>(area: &'a Area<'b>, p: &Panel) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(&p.title, (FONT, 16))
        .margin(8)
        .margin_right(24)
        .x_label_area_size(38)
        .y_label_area_size(70);
    b
}

/// The look every panel's axes and grid share.
fn style_mesh<'m, 'a, 'b, 'c, X, Y>(
    m: &'m mut MeshStyle<'a, 'b, X, Y, SVGBackend<'c>>,
    tick_size: u32,
) -> &'m mut MeshStyle<'a, 'b, X, Y, SVGBackend<'c>>
where
    X: Ranged,
    Y: Ranged,
{
    m.axis_desc_style((FONT, 14))
        .label_style((FONT, tick_size))
        .max_light_lines(1)
        .light_line_style(GRID_LIGHT)
        .bold_line_style(GRID_BOLD)
}

/// A label font anchored at its vertical centre.
fn label_style(size: u32, colour: &RGBColor, h: HPos) -> TextStyle<'static> {
    (FONT, size)
        .into_font()
        .color(colour)
        .pos(Pos::new(h, VPos::Center))
}

fn legend_box<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    pos: SeriesLabelPosition,
) -> Result<(), PlotError> {
    chart
        .configure_series_labels()
        .position(pos)
        .margin(8)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(0x99, 0x99, 0x99))
        .draw()
        .map_err(err)
}

/// The top of the y axis: room above the data for a legend of `entries`
/// rows in the upper right, so that it never covers a line.
fn headroom(y_data: f64, entries: usize) -> f64 {
    // Plot height of a line panel (px) and legend height per row.
    let plot_px = f64::from(PANEL_H) - 90.0;
    let legend_px = 20.0 + 18.0 * entries as f64;
    let free = (1.0 - legend_px / plot_px).max(0.3);
    y_data / free
}

fn draw_lines(
    area: &Area<'_>,
    p: &Panel,
    lines: &[Line],
    refs: &[(String, f64)],
    windows: &[Window],
    colour: &dyn Fn(&str) -> RGBColor,
) -> Result<(), PlotError> {
    let (x0, x1) = p.x_extent();
    let values = || {
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|q| q.1))
            .chain(refs.iter().map(|r| r.1))
            .filter(|v| v.is_finite())
    };
    let y_data = values().fold(0.0, f64::max);
    let entries = lines.len() + refs.len() + windows.len();
    let builder = |area| builder(area, p);
    if p.log_y {
        let lo = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        // Down to the decade below the smallest value, so it has a tick.
        let lo = if lo.is_finite() {
            10f64.powf((lo / 1.5).log10().floor())
        } else {
            1e-3
        };
        let hi = if y_data > lo { y_data } else { lo * 10.0 };
        // Headroom in decades: the same fraction of the axis as linear.
        let top = lo * (hi / lo).powf(headroom(1.0, entries));
        let chart = builder(area)
            .build_cartesian_2d(x0..x1, (lo..top).log_scale())
            .map_err(err)?;
        let lines: Vec<Line> = lines
            .iter()
            .map(|l| {
                Line::new(
                    l.label.clone(),
                    l.points.iter().copied().filter(|q| q.1 > 0.0).collect(),
                )
            })
            .collect();
        fill_lines(chart, p, &lines, refs, windows, (x0, x1), (lo, top), colour)
    } else {
        let y1 = if y_data > 0.0 {
            headroom(y_data, entries)
        } else {
            1.0
        };
        let chart = builder(area)
            .build_cartesian_2d(x0..x1, 0.0..y1)
            .map_err(err)?;
        fill_lines(chart, p, lines, refs, windows, (x0, x1), (0.0, y1), colour)
    }
}

#[allow(clippy::too_many_arguments)]
fn fill_lines<'a, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    p: &Panel,
    lines: &[Line],
    refs: &[(String, f64)],
    windows: &[Window],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    colour: &dyn Fn(&str) -> RGBColor,
) -> Result<(), PlotError>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    style_mesh(&mut chart.configure_mesh(), 12)
        .x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(err)?;
    for (i, w) in windows.iter().enumerate() {
        let c = SHADE[i % SHADE.len()];
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(w.from.max(x0), y0), (w.to.min(x1), y1)],
                c.mix(0.12).filled(),
            )))
            .map_err(err)?
            .label(&w.label)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 20, y + 6)], c.mix(0.25).filled())
            });
    }
    for l in lines {
        let c = colour(&l.label);
        chart
            .draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(&l.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    for (label, y) in refs {
        let style = BLACK.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(vec![(x0, *y), (x1, *y)], 8, 5, style))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (7, 0)], style)
                    + PathElement::new(vec![(12, 0), (19, 0)], style)
            });
    }
    legend_box(&mut chart, SeriesLabelPosition::UpperRight)
}

fn draw_states(
    area: &Area<'_>,
    p: &Panel,
    spans: &[Span],
    palette: &[(String, (u8, u8, u8))],
) -> Result<(), PlotError> {
    let (x0, x1) = p.x_extent();
    let mut chart = builder(area, p)
        .build_cartesian_2d(x0..x1, 0.0..0.95)
        .map_err(err)?;
    style_mesh(&mut chart.configure_mesh(), 12)
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(&p.x_label)
        .x_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(err)?;
    let color = |state: &str| {
        palette
            .iter()
            .find(|(n, _)| n == state)
            .map_or(RGBColor(0x99, 0x99, 0x99), |(_, (r, g, b))| {
                RGBColor(*r, *g, *b)
            })
    };
    chart
        .draw_series(spans.iter().map(|s| {
            Rectangle::new(
                [(s.from.max(x0), 0.0), (s.to.min(x1), 0.6)],
                color(&s.state).filled(),
            )
        }))
        .map_err(err)?;
    // A label inside every span wide enough to hold it.
    let px_per_x = f64::from(WIDTH - 110) / (x1 - x0);
    chart
        .draw_series(
            spans
                .iter()
                .filter(|s| (s.to - s.from) * px_per_x > 7.5 * s.state.len() as f64)
                .map(|s| {
                    Text::new(
                        s.state.clone(),
                        ((s.from + s.to) / 2.0, 0.3),
                        label_style(11, &WHITE, HPos::Center),
                    )
                }),
        )
        .map_err(err)?;
    // Legend: every state that occurs, in diagram order, in a row above
    // the band.
    let present: Vec<&(String, (u8, u8, u8))> = palette
        .iter()
        .filter(|(n, _)| spans.iter().any(|s| &s.state == n))
        .collect();
    let w = x1 - x0;
    let mut x = x0;
    for (name, (r, g, b)) in present {
        let c = RGBColor(*r, *g, *b);
        chart
            .draw_series([
                Rectangle::new([(x, 0.74), (x + w * 0.02, 0.9)], c.filled()).into_dyn(),
                Text::new(
                    name.clone(),
                    (x + w * 0.025, 0.82),
                    label_style(12, &BLACK, HPos::Left),
                )
                .into_dyn(),
            ])
            .map_err(err)?;
        x += w * (0.045 + 0.0105 * name.len() as f64);
    }
    Ok(())
}

fn draw_bars(
    area: &Area<'_>,
    p: &Panel,
    categories: &[String],
    stacks: &[(String, Vec<f64>)],
    colour: &dyn Fn(&str) -> RGBColor,
) -> Result<(), PlotError> {
    let n = categories.len() as f64;
    let mut chart = builder(area, p)
        .build_cartesian_2d(-0.5..n - 0.5, 0.0..headroom(100.0, stacks.len()))
        .map_err(err)?;
    let cats = categories.to_vec();
    style_mesh(&mut chart.configure_mesh(), 13)
        .disable_x_mesh()
        .y_desc(&p.y_label)
        .x_labels(categories.len())
        .x_label_formatter(&move |v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
                cats[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| {
            if *v <= 100.0 {
                format!("{v:.0}%")
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(err)?;
    let mut bottom = vec![0.0; categories.len()];
    for (label, shares) in stacks {
        let c = colour(label);
        let bars: Vec<(f64, f64, f64)> = shares
            .iter()
            .enumerate()
            .take(categories.len())
            .map(|(i, &s)| {
                let b = bottom[i];
                bottom[i] += s;
                (i as f64, b, b + s)
            })
            .collect();
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x, b, t)| Rectangle::new([(x - 0.3, b), (x + 0.3, t)], c.filled())),
            )
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], c.filled()));
        chart
            .draw_series(
                bars.iter()
                    .filter(|&&(_, b, t)| t - b >= 6.0)
                    .map(|&(x, b, t)| {
                        Text::new(
                            format!("{:.1}%", t - b),
                            (x, (b + t) / 2.0),
                            label_style(12, &WHITE, HPos::Center),
                        )
                    }),
            )
            .map_err(err)?;
    }
    legend_box(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Tick label: no trailing zeros, at most 3 decimals.
fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_panels_are_dropped_and_an_empty_figure_is_an_error() {
        let mut f = Figure::new("t");
        f.push(Panel::lines("nothing", "MiB").line(Line::new("a", vec![])));
        assert!(f.panels.is_empty());
        assert!(render_svg(&f).unwrap_err().0.contains("no data"));
        f.push(Panel::lines("x", "MiB").line(Line::new("arm a", vec![(0.0, 1.0), (2.0, 3.0)])));
        let svg = render_svg(&f).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("arm a") && svg.contains("time (ms)"));
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(10.0), "10");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.1250), "0.125");
        assert_eq!(tick(-0.0), "0");
    }
}

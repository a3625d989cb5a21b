//! Small SVG plots written by hand: axes with "nice" ticks (1, 2, 5 × 10^k), labels, a legend,
//! and line, point or step series. The output is a self-contained `<svg>` element (no fonts,
//! scripts or links to fetch), so a report page shows its figures offline.
//!
//! Values are mapped linearly (or logarithmically on the y axis, for latency histograms whose
//! counts span decades) into a fixed-size frame; numbers on the axes use SI prefixes (k, M, G)
//! so "14.9M" reads better than "14880952".

use std::fmt::Write;

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Straight lines through the points, with a dot at each.
    Line,
    /// A dashed line without dots (reference curves such as the line rate).
    Dashed,
    /// Dots only.
    Points,
    /// A histogram outline: each point is (bucket start, count) and holds until the next.
    Step,
}

/// One named series.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
}

/// A plot with its axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Logarithmic y axis (values <= 0 are left out).
    pub log_y: bool,
    /// Let the y axis start at 0 (throughput, loss) rather than at the smallest value.
    pub y_from_zero: bool,
}

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 48.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// Text safe inside SVG/HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A number with an SI prefix and three significant digits: 14880952 -> "14.9M",
/// 0.01234 -> "0.0123".
pub fn si(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return if value.is_nan() {
            "–".into()
        } else {
            "0".into()
        };
    }
    let magnitude = value.abs();
    let (scaled, prefix) = if magnitude >= 1e9 {
        (value / 1e9, "G")
    } else if magnitude >= 1e6 {
        (value / 1e6, "M")
    } else if magnitude >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    let decimals = (2 - scaled.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{scaled:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{prefix}")
}

/// About `count` round tick values covering `low..=high`.
pub fn ticks(low: f64, high: f64, count: usize) -> Vec<f64> {
    if !(low.is_finite() && high.is_finite()) || high <= low {
        return vec![low];
    }
    let rough = (high - low) / count.max(1) as f64;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|&s| s >= rough)
        .unwrap_or(10.0 * power);
    let first = (low / step).ceil() as i64;
    let last = (high / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

struct Axis {
    low: f64,
    high: f64,
    log: bool,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Axis {
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            let v = if log { v.log10() } else { v };
            low = low.min(v);
            high = high.max(v);
        }
        if !low.is_finite() {
            (low, high) = (0.0, 1.0);
        }
        if from_zero && !log {
            low = low.min(0.0);
        }
        if log {
            (low, high) = (low.floor(), high.ceil().max(low.floor() + 1.0));
        } else if high - low < f64::EPSILON * high.abs().max(1.0) {
            (low, high) = (low - 1.0, high + 1.0);
        } else {
            let pad = (high - low) * 0.05;
            high += pad;
            if !(from_zero && low == 0.0) {
                low -= pad;
            }
        }
        Axis { low, high, log }
    }

    fn fraction(&self, value: f64) -> f64 {
        let v = if self.log { value.log10() } else { value };
        (v - self.low) / (self.high - self.low)
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            (self.low as i64..=self.high as i64)
                .map(|e| (e as f64, si(10f64.powi(e as i32))))
                .map(|(e, label)| (10f64.powf(e), label))
                .collect()
        } else {
            ticks(self.low, self.high, 6)
                .into_iter()
                .map(|t| (t, si(t)))
                .collect()
        }
    }
}

impl Plot {
    /// The plot as one `<svg>` element.
    pub fn render(&self) -> String {
        let plot_width = WIDTH - LEFT - RIGHT;
        let plot_height = HEIGHT - TOP - BOTTOM;
        let all = || self.series.iter().flat_map(|s| s.points.iter());
        let x_axis = Axis::new(all().map(|p| p.0), false, false);
        let y_axis = Axis::new(all().map(|p| p.1), self.log_y, self.y_from_zero);
        let x = |v: f64| LEFT + x_axis.fraction(v) * plot_width;
        let y = |v: f64| TOP + (1.0 - y_axis.fraction(v)) * plot_height;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11" role="img"><title>{title}</title>"#,
            title = escape(&self.title)
        );
        let _ = write!(
            svg,
            r#"<text x="{cx}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{}</text>"#,
            escape(&self.title),
            cx = LEFT + plot_width / 2.0
        );
        let _ = write!(
            svg,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_width}\" height=\"{plot_height}\" fill=\"none\" stroke=\"#444\"/>"
        );
        for (value, label) in x_axis.ticks() {
            let px = x(value);
            let _ = write!(
                svg,
                "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{b}\" stroke=\"#ddd\"/><text x=\"{px:.1}\" y=\"{t}\" text-anchor=\"middle\">{label}</text>",
                b = TOP + plot_height,
                t = TOP + plot_height + 15.0
            );
        }
        for (value, label) in y_axis.ticks() {
            let py = y(value);
            let _ = write!(
                svg,
                "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{r}\" y2=\"{py:.1}\" stroke=\"#ddd\"/><text x=\"{t}\" y=\"{ty:.1}\" text-anchor=\"end\">{label}</text>",
                r = LEFT + plot_width,
                t = LEFT - 6.0,
                ty = py + 4.0
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{cx}" y="{ly}" text-anchor="middle">{}</text>"#,
            escape(&self.x_label),
            cx = LEFT + plot_width / 2.0,
            ly = HEIGHT - 10.0
        );
        let _ = write!(
            svg,
            r#"<text x="16" y="{cy}" text-anchor="middle" transform="rotate(-90 16 {cy})">{}</text>"#,
            escape(&self.y_label),
            cy = TOP + plot_height / 2.0
        );
        for (index, series) in self.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let points: Vec<(f64, f64)> = series
                .points
                .iter()
                .copied()
                .filter(|p| p.0.is_finite() && p.1.is_finite() && (!self.log_y || p.1 > 0.0))
                .collect();
            let mut path = String::new();
            for (i, &(px, py)) in points.iter().enumerate() {
                let command = if i == 0 { 'M' } else { 'L' };
                if series.style == Style::Step && i > 0 {
                    let _ = write!(path, "L{:.1},{:.1} ", x(px), y(points[i - 1].1));
                }
                let _ = write!(path, "{command}{:.1},{:.1} ", x(px), y(py));
            }
            let dash = if series.style == Style::Dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            if series.style != Style::Points && !path.is_empty() {
                let _ = write!(
                    svg,
                    "<path d=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.8\"{dash}/>",
                    path.trim_end()
                );
            }
            if matches!(series.style, Style::Line | Style::Points) {
                for &(px, py) in &points {
                    let _ = write!(
                        svg,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.8\" fill=\"{colour}\"/>",
                        x(px),
                        y(py)
                    );
                }
            }
            let ly = TOP + 8.0 + index as f64 * 16.0;
            let lx = LEFT + plot_width + 10.0;
            let _ = write!(
                svg,
                "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{x2}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"2.5\"{dash}/><text x=\"{tx}\" y=\"{ty}\">{}</text>",
                escape(&series.name),
                x2 = lx + 18.0,
                tx = lx + 22.0,
                ty = ly + 4.0
            );
        }
        svg.push_str("</svg>");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(64.0, 1518.0, 6), [500.0, 1000.0, 1500.0]);
        let t = ticks(0.0, 14.88e6, 6);
        assert_eq!(t.first(), Some(&0.0));
        assert_eq!(t.last(), Some(&10e6));
    }

    #[test]
    fn numbers_get_si_prefixes() {
        assert_eq!(si(14_880_952.0), "14.9M");
        assert_eq!(si(1_500.0), "1.5k");
        assert_eq!(si(2e9), "2G");
        assert_eq!(si(0.5), "0.5");
        assert_eq!(si(0.0), "0");
        assert_eq!(si(-0.0), "0");
        assert_eq!(si(0.012345), "0.0123");
        assert_eq!(si(-0.02), "-0.02");
        assert_eq!(si(999.0), "999");
    }

    #[test]
    fn a_plot_has_axes_labels_and_one_path_per_series() {
        let plot = Plot {
            title: "a <b>".into(),
            x_label: "frame size (bytes)".into(),
            y_label: "frames/s".into(),
            series: vec![
                Series {
                    name: "NDR".into(),
                    points: vec![(64.0, 1e6), (128.0, 9e5), (1518.0, 8e5)],
                    style: Style::Line,
                },
                Series {
                    name: "line rate".into(),
                    points: vec![(64.0, 14.88e6), (1518.0, 812_743.0)],
                    style: Style::Dashed,
                },
            ],
            log_y: false,
            y_from_zero: true,
        };
        let svg = plot.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("a &lt;b&gt;"));
        assert!(svg.contains(">frame size (bytes)</text>"));
        assert_eq!(svg.matches("<path").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("stroke-dasharray"));
    }
}

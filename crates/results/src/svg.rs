//! Charts as inline SVG, written by hand (`docs/report.md` says why no plotting crate): line
//! charts with threshold lines and a shaded band, a log-axis percentile curve, and bars. Every
//! string is escaped; every series says in `data-points` how many points it drew, so a test of
//! the rendered page can count them.

use std::fmt::Write as _;

/// `&`, `<`, `>`, `"` and `'` as entities: safe in element text and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most about `max` points of `points` (sorted by x), for drawing: the points are cut into
/// `max / 2` buckets and each keeps its lowest and highest y in x order, so a spike of one
/// interval still shows. The data stays exact in `samples.csv`.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    let max = max.max(2);
    if points.len() <= max {
        return points.to_vec();
    }
    let buckets = max / 2;
    let mut out = Vec::with_capacity(buckets * 2);
    for b in 0..buckets {
        let from = b * points.len() / buckets;
        let to = ((b + 1) * points.len() / buckets).min(points.len());
        let slice = &points[from..to];
        let (mut low, mut high) = (0, 0);
        for (i, p) in slice.iter().enumerate() {
            if p.1 < slice[low].1 {
                low = i;
            }
            if p.1 > slice[high].1 {
                high = i;
            }
        }
        if slice.is_empty() {
            continue;
        }
        let (a, b) = if low <= high {
            (low, high)
        } else {
            (high, low)
        };
        out.push(slice[a]);
        if a != b {
            out.push(slice[b]);
        }
    }
    out
}

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
pub struct LineChart {
    /// Identifies the chart in the page (`data-chart`).
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Horizontal lines (a threshold, a target) with their label.
    pub lines: Vec<(f64, String)>,
    /// A shaded x range with its label (the warm-up).
    pub band: Option<(f64, f64, String)>,
    /// x values are shown as percentiles: x = -log10(1 - q), labelled 90%, 99%, ….
    pub percentile_x: bool,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];
const W: f64 = 760.0;
const H: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 45.0;

/// A figure for axis labels: few digits, no exponent for everyday values.
pub fn tick(value: f64) -> String {
    let a = value.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{value:.0}")
    } else if a >= 1.0 {
        format!("{value:.1}")
    } else if a >= 0.01 {
        format!("{value:.3}")
    } else {
        format!("{value:.1e}")
    }
}

impl LineChart {
    /// The chart as an `<svg>` element, at most `max_points` points per series.
    pub fn svg(&self, max_points: usize) -> String {
        self.render(max_points, false, &[])
    }

    /// As [`LineChart::svg`], with a vertical line and its label at each event's x (the marks
    /// of `jetproof mark`: `<path class="mark">`); events outside the x range widen it.
    pub fn svg_with_events(&self, max_points: usize, events: &[(f64, String)]) -> String {
        self.render(max_points, false, events)
    }

    /// As [`LineChart::svg`], with a dot on every point (`<circle class="marker">`): for
    /// charts of a few measured points, like a sweep's, where each point is a test.
    pub fn svg_with_markers(&self, max_points: usize) -> String {
        self.render(max_points, true, &[])
    }

    fn render(&self, max_points: usize, markers: bool, events: &[(f64, String)]) -> String {
        let drawn: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| {
                downsample(
                    &s.points
                        .iter()
                        .copied()
                        .filter(|p| p.0.is_finite() && p.1.is_finite())
                        .collect::<Vec<_>>(),
                    max_points,
                )
            })
            .collect();
        let all = drawn.iter().flatten();
        let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut y1: f64 = 0.0;
        for p in all {
            x0 = x0.min(p.0);
            x1 = x1.max(p.0);
            y1 = y1.max(p.1);
        }
        if let Some((a, b, _)) = &self.band {
            x0 = x0.min(*a);
            x1 = x1.max(*b);
        }
        for (x, _) in events.iter().filter(|e| e.0.is_finite()) {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
        }
        for (y, _) in &self.lines {
            if y.is_finite() {
                y1 = y1.max(*y);
            }
        }
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= 0.0 {
            y1 = 1.0;
        }
        y1 *= 1.05;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT);
        let sy = |y: f64| TOP + (1.0 - y / y1) * (H - TOP - BOTTOM);
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
            escape(&self.id),
            escape(&self.title)
        );
        let _ = write!(
            out,
            r#"<text x="{}" y="18" class="title">{}</text>"#,
            W / 2.0,
            escape(&self.title)
        );
        if let Some((a, b, label)) = &self.band {
            let _ = write!(
                out,
                r##"<rect class="band" x="{:.1}" y="{TOP}" width="{:.1}" height="{}" fill="#ddd"/><text x="{:.1}" y="{}" class="small">{}</text>"##,
                sx(*a),
                (sx(*b) - sx(*a)).max(0.0),
                H - TOP - BOTTOM,
                sx(*a) + 3.0,
                H - BOTTOM - 4.0,
                escape(label)
            );
        }
        // Axes and ticks.
        let _ = write!(
            out,
            r##"<path d="M{LEFT} {TOP}V{}H{}" stroke="#444" fill="none"/>"##,
            H - BOTTOM,
            W - RIGHT
        );
        for i in 0..=4 {
            let y = y1 * f64::from(i) / 4.0;
            let _ = write!(
                out,
                r##"<path d="M{LEFT} {:.1}h{}" stroke="#eee"/><text x="{}" y="{:.1}" class="small" text-anchor="end">{}</text>"##,
                sy(y),
                W - LEFT - RIGHT,
                LEFT - 4.0,
                sy(y) + 4.0,
                tick(y)
            );
        }
        if self.percentile_x {
            let mut nines = 0.0;
            while nines <= x1 + 1e-9 {
                let label = match nines as u32 {
                    0 => "0%".to_string(),
                    n => {
                        let q = 100.0 * (1.0 - 10f64.powi(-(n as i32)));
                        let digits = n.saturating_sub(2) as usize;
                        format!("{q:.digits$}%")
                    }
                };
                let _ = write!(
                    out,
                    r#"<text x="{:.1}" y="{}" class="small" text-anchor="middle">{label}</text>"#,
                    sx(nines),
                    H - BOTTOM + 14.0
                );
                nines += 1.0;
            }
        } else {
            for i in 0..=5 {
                let x = x0 + (x1 - x0) * f64::from(i) / 5.0;
                let _ = write!(
                    out,
                    r#"<text x="{:.1}" y="{}" class="small" text-anchor="middle">{}</text>"#,
                    sx(x),
                    H - BOTTOM + 14.0,
                    tick(x)
                );
            }
        }
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" class="small" text-anchor="middle">{}</text><text x="14" y="{}" class="small" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
            (LEFT + W - RIGHT) / 2.0,
            H - 8.0,
            escape(&self.x_label),
            (TOP + H - BOTTOM) / 2.0,
            (TOP + H - BOTTOM) / 2.0,
            escape(&self.y_label)
        );
        for (y, label) in &self.lines {
            if !y.is_finite() {
                continue;
            }
            let _ = write!(
                out,
                r##"<path class="threshold" d="M{LEFT} {:.1}H{}" stroke="#d00" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" class="small" text-anchor="end" fill="#d00">{}</text>"##,
                sy(*y),
                W - RIGHT,
                W - RIGHT - 2.0,
                sy(*y) - 3.0,
                escape(label)
            );
        }
        for (i, (x, label)) in events.iter().filter(|e| e.0.is_finite()).enumerate() {
            // Labels alternate between two heights so that two close marks stay readable.
            let _ = write!(
                out,
                r##"<path class="mark" data-mark="{}" d="M{:.1} {TOP}V{}" stroke="#333" stroke-dasharray="2 3"/><text x="{:.1}" y="{:.1}" class="small" fill="#333">{}</text>"##,
                escape(label),
                sx(*x),
                H - BOTTOM,
                sx(*x) + 3.0,
                TOP + 24.0 + 12.0 * (i % 2) as f64,
                escape(label)
            );
        }
        for (i, (series, points)) in self.series.iter().zip(&drawn).enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut coords = String::with_capacity(points.len() * 12);
            for (j, p) in points.iter().enumerate() {
                if j > 0 {
                    coords.push(' ');
                }
                let _ = write!(coords, "{:.1},{:.1}", sx(p.0), sy(p.1));
            }
            let _ = write!(
                out,
                r#"<polyline class="series" data-series="{}" data-points="{}" points="{coords}" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
                escape(&series.name),
                points.len()
            );
            if markers {
                for p in points {
                    let _ = write!(
                        out,
                        r#"<circle class="marker" cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                        sx(p.0),
                        sy(p.1)
                    );
                }
            }
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{}" class="small">{}</text>"#,
                LEFT + 10.0 + 150.0 * i as f64,
                TOP + 2.0,
                LEFT + 24.0 + 150.0 * i as f64,
                TOP + 11.0,
                escape(&series.name)
            );
        }
        out.push_str("</svg>");
        out
    }
}

/// A bar chart: one bar per (label, value), labels escaped.
pub fn bars(id: &str, title: &str, unit: &str, bars: &[(String, f64)]) -> String {
    let n = bars.len().max(1) as f64;
    let top = bars
        .iter()
        .map(|b| b.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-12)
        * 1.1;
    let plot_w = W - LEFT - RIGHT;
    let slot = plot_w / n;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}"><text x="{}" y="18" class="title">{}</text>"#,
        escape(id),
        escape(title),
        W / 2.0,
        escape(title)
    );
    let _ = write!(
        out,
        r##"<path d="M{LEFT} {TOP}V{}H{}" stroke="#444" fill="none"/><text x="14" y="{}" class="small" transform="rotate(-90 14 {})" text-anchor="middle">{}</text><g class="series" data-points="{}">"##,
        H - BOTTOM,
        W - RIGHT,
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        escape(unit),
        bars.len()
    );
    for (i, (label, value)) in bars.iter().enumerate() {
        let value = if value.is_finite() { *value } else { 0.0 };
        let h = value / top * (H - TOP - BOTTOM);
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let _ = write!(
            out,
            r##"<rect class="bar" data-value="{value}" x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="#1f77b4"/><text x="{:.1}" y="{:.1}" class="small" text-anchor="middle">{}</text><text x="{:.1}" y="{}" class="small" text-anchor="middle">{}</text>"##,
            H - BOTTOM - h,
            slot * 0.7,
            x + slot * 0.35,
            H - BOTTOM - h - 3.0,
            tick(value),
            x + slot * 0.35,
            H - BOTTOM + 14.0,
            escape(label)
        );
    }
    out.push_str("</g></svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_pairs(svg: &str) -> Vec<usize> {
        svg.split(" points=\"")
            .skip(1)
            .map(|rest| {
                rest.split('"')
                    .next()
                    .unwrap_or("")
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .count()
            })
            .collect()
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>"a"&'b'</script>"#),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;&lt;/script&gt;"
        );
        let chart = LineChart {
            id: "x".into(),
            title: "<b>t</b>".into(),
            x_label: "s".into(),
            y_label: "ms".into(),
            series: vec![Series {
                name: "db\"1<img src=x>".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            }],
            lines: vec![(1.5, "limit <20>".into())],
            band: None,
            percentile_x: false,
        };
        let svg = chart.svg(100);
        assert!(!svg.contains("<img"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(svg.contains("db&quot;1&lt;img src=x&gt;"), "{svg}");
        let b = bars("b", "t", "u", &[("<x>".into(), 1.0)]);
        assert!(b.contains("&lt;x&gt;") && !b.contains("<x>"), "{b}");
    }

    #[test]
    fn draws_every_point_it_says_it_draws() {
        let points: Vec<(f64, f64)> = (0..50).map(|i| (f64::from(i), f64::from(i % 7))).collect();
        let chart = LineChart {
            id: "c".into(),
            title: "t".into(),
            x_label: "s".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "a".into(),
                points: points.clone(),
            }],
            lines: vec![],
            band: Some((-10.0, 0.0, "warm-up".into())),
            percentile_x: false,
        };
        let svg = chart.svg(1000);
        assert_eq!(count_pairs(&svg), vec![50]);
        assert!(svg.contains(r#"data-points="50""#), "{svg}");
        assert!(svg.contains(r#"class="band""#), "{svg}");
    }

    #[test]
    fn downsampling_bounds_points_and_keeps_spikes() {
        let mut points: Vec<(f64, f64)> = (0..86_400).map(|i| (f64::from(i), 1.0)).collect();
        points[43_210].1 = 500.0;
        let drawn = downsample(&points, 1000);
        assert!(drawn.len() <= 1000, "{}", drawn.len());
        assert!(drawn.iter().any(|p| p.1 == 500.0), "the spike is kept");
        assert!(
            drawn.windows(2).all(|w| w[0].0 < w[1].0),
            "x stays in order"
        );
        let chart = LineChart {
            id: "c".into(),
            title: "t".into(),
            x_label: "s".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "a".into(),
                points,
            }],
            lines: vec![],
            band: None,
            percentile_x: false,
        };
        let svg = chart.svg(1000);
        let pairs = count_pairs(&svg);
        assert_eq!(pairs.len(), 1);
        assert!(pairs[0] <= 1000 && pairs[0] > 100, "{pairs:?}");
        assert!(svg.contains(&format!(r#"data-points="{}""#, pairs[0])));
    }
}

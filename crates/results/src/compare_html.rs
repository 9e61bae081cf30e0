//! `compare.html` (`docs/report.md`, "compare"): the comparison's tables with BASE and NEW
//! overlaid in one chart each — transactional IOPS per sample interval, each class's average and
//! p99 latency per interval (from each run's `samples.csv`), and each class's latency by
//! percentile (the instances' histograms merged exactly, as `report.html` draws them). The
//! charts are `report.html`'s (`crate::svg::LineChart`), two series each: `BASE` and `NEW`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jetproof_io::hist::LatencyHistogram;

use crate::TestResult;
use crate::aggregate::AggregateResult;
use crate::html::{
    CLASS_NAMES, MAX_POINTS, SampleRow, over_time, page, parse_samples, percentile_points,
};
use crate::svg::{LineChart, Series, escape};

/// One sample interval of a class (`over_time`): elapsed, ops/s, average ms, p99 ms.
type Interval = (f64, f64, f64, f64);

/// The two series' names, in the order drawn (the first colour is BASE's).
const NAMES: [&str; 2] = ["BASE", "NEW"];

/// Transactional IOPS per interval: database reads + writes of all instances.
fn iops(samples: &[SampleRow]) -> Vec<(f64, f64)> {
    let mut by_time: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for class in ["db_read", "db_write"] {
        for (t, ops, _, _) in over_time(samples, class) {
            let e = by_time
                .entry((t * 1000.0).round() as u64)
                .or_insert((t, 0.0));
            e.1 += ops;
        }
    }
    by_time.into_values().collect()
}

/// Each class's histogram, the instances' merged exactly.
fn merged(result: &TestResult) -> BTreeMap<String, LatencyHistogram> {
    let mut merged: BTreeMap<String, LatencyHistogram> = BTreeMap::new();
    for instance in &result.instances {
        for (key, class) in &instance.io {
            if let Some(h) = &class.histogram {
                merged.entry(key.clone()).or_default().merge(&h.latency);
            }
        }
    }
    merged.retain(|_, h| h.count > 0);
    merged
}

fn class_name(key: &str) -> &str {
    CLASS_NAMES
        .iter()
        .find(|c| c.0 == key)
        .map(|c| c.1)
        .unwrap_or(key)
}

/// An overlay of BASE's and NEW's points; None when neither has any.
fn overlay(
    id: String,
    title: String,
    x_label: &str,
    y_label: &str,
    points: [Vec<(f64, f64)>; 2],
    lines: Vec<(f64, String)>,
    percentile_x: bool,
) -> Option<String> {
    if points.iter().all(Vec::is_empty) {
        return None;
    }
    let [base, new] = points;
    let chart = LineChart {
        id,
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        series: vec![
            Series {
                name: NAMES[0].into(),
                points: base,
            },
            Series {
                name: NAMES[1].into(),
                points: new,
            },
        ],
        lines,
        band: None,
        percentile_x,
    };
    Some(chart.svg(MAX_POINTS))
}

/// The overlaid charts of two results of the same test, as HTML (headings and `<svg>`s); empty
/// when neither has samples nor histograms (a checksum, a backup without samples).
pub fn charts(
    base: &TestResult,
    new: &TestResult,
    base_samples: Option<&str>,
    new_samples: Option<&str>,
) -> String {
    let samples = [
        base_samples.map(parse_samples).unwrap_or_default(),
        new_samples.map(parse_samples).unwrap_or_default(),
    ];
    let mut out = String::new();
    let x_time = "seconds into the measured window";
    if samples.iter().any(|s| !s.is_empty()) {
        out.push_str("<h2>Over Time, BASE and NEW</h2>\n");
        let mut lines = Vec::new();
        if let Some(target) = base.target_iops {
            lines.push((target, format!("BASE target {target:.1}")));
        }
        if let Some(target) = new.target_iops.filter(|t| Some(*t) != base.target_iops) {
            lines.push((target, format!("NEW target {target:.1}")));
        }
        if let Some(svg) = overlay(
            "compare-iops".into(),
            "Transactional I/O per Second".into(),
            x_time,
            "IOPS",
            [iops(&samples[0]), iops(&samples[1])],
            lines,
            false,
        ) {
            out.push_str(&svg);
        }
        let limits = base.parameters.limits;
        for (key, name) in CLASS_NAMES {
            let series = [over_time(&samples[0], key), over_time(&samples[1], key)];
            if series.iter().any(Vec::is_empty) {
                continue;
            }
            let limit = match (key, &limits) {
                ("db_read", Some(l)) => Some(l.db_read_avg_ms),
                ("log_write", Some(l)) => Some(l.log_write_avg_ms),
                _ => None,
            };
            let pick = |f: fn(&Interval) -> (f64, f64)| {
                [
                    series[0].iter().map(f).collect::<Vec<_>>(),
                    series[1].iter().map(f).collect::<Vec<_>>(),
                ]
            };
            let averages = pick(|s| (s.0, s.2));
            // A limit far above the data would flatten the lines: drawn only when near them.
            let top = averages.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
            let lines: Vec<(f64, String)> = limit
                .filter(|l| *l <= top * 4.0)
                .map(|l| (l, format!("BASE average limit {l} ms")))
                .into_iter()
                .collect();
            for (what, points, lines) in [
                ("average", averages, lines),
                ("p99 (highest instance)", pick(|s| (s.0, s.3)), Vec::new()),
            ] {
                if let Some(svg) = overlay(
                    format!(
                        "compare-{}-{key}",
                        if what == "average" { "avg" } else { "p99" }
                    ),
                    format!("{name}: {what} latency per sample interval"),
                    x_time,
                    "ms",
                    points,
                    lines,
                    false,
                ) {
                    out.push_str(&svg);
                }
            }
        }
    }
    out.push_str(&distributions(&[merged(base), merged(new)]));
    out
}

/// BASE's and NEW's latency by percentile, one chart per class both have a histogram of.
fn distributions(hists: &[BTreeMap<String, LatencyHistogram>; 2]) -> String {
    let mut out = String::new();
    let both: Vec<&String> = hists[0]
        .keys()
        .filter(|k| hists[1].contains_key(*k))
        .collect();
    if !both.is_empty() {
        out.push_str("<h2>Latency Distribution Curves, BASE and NEW</h2>\n");
        for key in both {
            let (b, n) = (&hists[0][key], &hists[1][key]);
            if let Some(svg) = overlay(
                format!("compare-distribution-{key}"),
                format!(
                    "{}: latency by percentile (BASE {} I/Os, NEW {} I/Os)",
                    class_name(key),
                    b.count,
                    n.count
                ),
                "percentile (log scale)",
                "ms",
                [percentile_points(b), percentile_points(n)],
                Vec::new(),
                true,
            ) {
                out.push_str(&svg);
            }
        }
    }
    out
}

/// The `compare.html` of two aggregates: the comparison's tables (`markdown`, from
/// [`crate::compare::aggregate_markdown`]), then the whole solution's latency by percentile,
/// BASE and NEW overlaid (each aggregate's `totals`: the histograms of every instance of every
/// server merged exactly). An aggregate keeps no samples, so there are no charts over time.
pub fn aggregate_page_html(
    base: &AggregateResult,
    new: &AggregateResult,
    markdown: &str,
) -> String {
    let title = format!("jetproof aggregate {} test: comparison", base.test.name());
    let hists = [base, new].map(|a| {
        a.totals
            .iter()
            .filter_map(|(k, c)| c.histogram.as_ref().map(|h| (k.clone(), h.latency.clone())))
            .filter(|(_, h)| h.count > 0)
            .collect::<BTreeMap<_, _>>()
    });
    tables_page(&title, markdown, &distributions(&hists))
}

/// A comparison page: the title, the Markdown's tables (its title left out), then the charts.
fn tables_page(title: &str, markdown: &str, charts: &str) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "<h1>{}</h1>", escape(title));
    let tables = crate::html::markdown_to_html(
        &markdown
            .lines()
            .skip_while(|l| l.starts_with("# ") || l.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    body.push_str(&tables);
    body.push_str(charts);
    page(title, &body)
}

/// `compare.html`: the title, the comparison's Markdown (`markdown`, from
/// [`crate::compare::markdown`]) as HTML, title left out, then the overlaid charts.
pub fn page_html(
    base: &TestResult,
    new: &TestResult,
    base_samples: Option<&str>,
    new_samples: Option<&str>,
    markdown: &str,
) -> String {
    let title = format!("jetproof {} test: comparison", base.test.name());
    // The runs and figures first, as in compare.md; the charts after them.
    tables_page(
        &title,
        markdown,
        &charts(base, new, base_samples, new_samples),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(scale: f64) -> String {
        let mut text = String::from(
            "elapsed_s,instance,class,count,ops_per_sec,avg_latency_ms,p99_latency_ms\n",
        );
        for i in 1..=4 {
            let t = f64::from(i) * 0.5;
            for (class, ops, ms) in [
                ("db_read", 100.0, 1.0),
                ("db_write", 50.0, 2.0),
                ("log_write", 30.0, 0.5),
            ] {
                let _ = writeln!(
                    text,
                    "{t},db1,{class},{},{},{},{}",
                    ops * 0.5 * scale,
                    ops * scale,
                    ms * scale,
                    ms * scale * 3.0
                );
            }
        }
        text
    }

    #[test]
    fn every_chart_overlays_base_and_new() {
        let result = crate::TestResult::new(
            crate::TestKind::Performance,
            "2026-11-27T08:00:00Z".into(),
            10.0,
            Default::default(),
        );
        let html = charts(&result, &result, Some(&samples(1.0)), Some(&samples(2.0)));
        let charts = html.matches("<svg").count();
        // IOPS, then average and p99 of each of the three classes.
        assert_eq!(charts, 7, "{html}");
        assert_eq!(
            html.matches("data-series=\"BASE\" data-points=\"4\"")
                .count(),
            7
        );
        assert_eq!(
            html.matches("data-series=\"NEW\" data-points=\"4\"")
                .count(),
            7
        );
        // NEW's IOPS are twice BASE's: its polyline lies above (smaller y) at every point.
        let ys = |series: &str| -> Vec<f64> {
            let at = html
                .find(&format!("data-series=\"{series}\""))
                .expect("series");
            let rest = &html[at..];
            let start = rest.find(" points=\"").expect("points") + 9;
            let end = start + rest[start..].find('"').expect("end");
            rest[start..end]
                .split(' ')
                .map(|p| p.split(',').nth(1).expect("y").parse().expect("number"))
                .collect()
        };
        let (b, n) = (ys("BASE"), ys("NEW"));
        assert!(b.iter().zip(&n).all(|(b, n)| n < b), "{b:?} {n:?}");
    }
}

//! `sweep.json`, `sweep.md` and `sweep.html` of `jetproof sweep` (`docs/sweep.md`), and the
//! comparison of finished sweeps (`sweep-compare.md`, `.html`): the document's types and its
//! rendering. Running the points (the thread list, the settings, `--find-max`'s search) is the
//! procedure's, `jetproof_procedures::sweep`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::svg::{LineChart, Series};

/// Version of the `sweep.json` layout (`docs/sweep.md`).
pub const SWEEP_VERSION: u32 = 1;

/// The thread counts of a sweep, ascending, and the step between neighbours (the smallest gap:
/// what `--find-max` answers within).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadList {
    pub values: Vec<u32>,
    pub step: u32,
}

/// `--set KEY=V1,V2,...`: one job key (as in the job file, `table.key`) and its values, each a
/// point of its own series.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSpec {
    pub key: String,
    pub values: Vec<String>,
}

/// One I/O class of a point, all instances together: count, rate, exact average and the p99
/// of the merged histograms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassFigures {
    pub count: u64,
    pub ops_per_sec: f64,
    pub avg_ms: f64,
    pub p99_ms: f64,
}

/// One point of a sweep, as `sweep.json` holds it: every figure read from the point's own
/// `result.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub series: String,
    pub settings: BTreeMap<String, String>,
    /// Sessions per database.
    pub threads: u32,
    /// The point's results folder, relative to the sweep's.
    pub dir: String,
    pub achieved_iops: f64,
    pub target_iops: Option<f64>,
    /// `db_read`, `db_write`, `log_write`, ... (the classes the run had).
    pub classes: BTreeMap<String, ClassFigures>,
    pub verdict: String,
    pub reasons: Vec<String>,
    /// The point was stopped early (a signal): it is run again when the sweep resumes.
    pub interrupted: bool,
    /// A storage error stopped an instance (the sweep stops).
    pub storage_error: bool,
    /// Read from a previous run of the same sweep (`--out` reused), not run again.
    #[serde(default)]
    pub resumed: bool,
}

impl Point {
    pub fn passed(&self) -> bool {
        self.verdict == "pass"
    }

    /// The figures of one I/O class (`db_read`, `log_write`, ...), when the point had it.
    pub fn class(&self, name: &str) -> Option<&ClassFigures> {
        self.classes.get(name)
    }

    /// One line for the terminal and the decision log.
    pub fn summary(&self) -> String {
        let class = |name: &str, label: &str| match self.class(name) {
            Some(c) => format!(", {label} {:.2} ms avg (p99 {:.2})", c.avg_ms, c.p99_ms),
            None => String::new(),
        };
        format!(
            "{} thread(s): {:.1} IOPS{}{}: {}",
            self.threads,
            self.achieved_iops,
            class("db_read", "db read"),
            class("log_write", "log write"),
            self.verdict
        )
    }
}

/// One decision of `--find-max`, with its reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub series: String,
    /// The point the decision was made on (none for the final answer's own line).
    pub threads: Option<u32>,
    pub decision: String,
    pub reason: String,
}

/// `--find-max`'s answer for one series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MaxFound {
    pub series: String,
    /// The largest thread count that passed (none: even the smallest failed).
    pub threads: Option<u32>,
    pub achieved_iops: Option<f64>,
    /// The smallest count that failed above it (none: the top of the range passed).
    pub first_failing: Option<u32>,
    /// Points the search ran (resumed ones included).
    pub points: usize,
    /// The answer is exact to this many threads (the step of `--threads`).
    pub step: u32,
}

/// `sweep.json` (`docs/sweep.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepDoc {
    pub sweep_version: u32,
    pub tool_version: String,
    /// RFC 3339 UTC: when this sweep (or its first run, when resumed) started, and the last
    /// time the document was written.
    pub started: String,
    pub updated: String,
    /// The job every point ran, as TOML (each point with its own thread count and settings).
    pub job: String,
    pub threads: ThreadList,
    pub sets: Vec<SetSpec>,
    pub find_max: bool,
    /// The job's average-latency thresholds (ms), drawn on the charts.
    pub db_read_avg_ms: f64,
    pub log_write_avg_ms: f64,
    pub points: Vec<Point>,
    pub decisions: Vec<Decision>,
    pub max: Vec<MaxFound>,
    /// How the sweep ended: `complete`, `running` (being written), `interrupted` or
    /// `storage-error`.
    pub state: String,
}

impl SweepDoc {
    /// True when `other` (a `sweep.json` found in `--out`) is this sweep: same job, thread
    /// list, settings and mode, so its finished points can be kept.
    pub fn same_sweep(&self, other: &SweepDoc) -> bool {
        self.job == other.job
            && self.threads == other.threads
            && self.sets == other.sets
            && self.find_max == other.find_max
    }
}

/// Figures a chart plots, from one series' points in thread order.
fn series_points(
    points: &[&Point],
    x: fn(&Point) -> Option<f64>,
    y: fn(&Point) -> Option<f64>,
) -> Vec<(f64, f64)> {
    points.iter().filter_map(|p| Some((x(p)?, y(p)?))).collect()
}

fn iops(p: &Point) -> Option<f64> {
    Some(p.achieved_iops)
}
fn threads_x(p: &Point) -> Option<f64> {
    Some(f64::from(p.threads))
}
fn db_read_avg(p: &Point) -> Option<f64> {
    p.class("db_read").map(|c| c.avg_ms)
}
fn log_write_avg(p: &Point) -> Option<f64> {
    p.class("log_write").map(|c| c.avg_ms)
}
fn db_read_p99(p: &Point) -> Option<f64> {
    p.class("db_read").map(|c| c.p99_ms)
}
fn log_write_p99(p: &Point) -> Option<f64> {
    p.class("log_write").map(|c| c.p99_ms)
}

/// One curve per (sweep, series): `label` names the sweep when several are overlaid.
pub struct Curve<'a> {
    pub name: String,
    pub points: Vec<&'a Point>,
}

/// The curves of one sweep, one per series, points in thread order.
pub fn curves<'a>(doc: &'a SweepDoc, sweep_name: Option<&str>) -> Vec<Curve<'a>> {
    let mut order: Vec<&str> = Vec::new();
    for p in &doc.points {
        if !order.contains(&p.series.as_str()) {
            order.push(&p.series);
        }
    }
    order
        .into_iter()
        .map(|series| {
            let mut points: Vec<&Point> = doc
                .points
                .iter()
                .filter(|p| p.series == series && !p.interrupted)
                .collect();
            points.sort_by_key(|p| p.threads);
            // In a legend, a setting by its last key part: `io_engine=std`, not
            // `storage.io_engine=std` (the tables keep the whole key).
            let short = points.first().filter(|p| !p.settings.is_empty()).map(|p| {
                p.settings
                    .iter()
                    .map(|(k, v)| format!("{}={v}", k.rsplit('.').next().unwrap_or(k)))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            let series = short.as_deref().unwrap_or(series);
            let name = match sweep_name {
                Some(sweep) if series == "threads" => sweep.to_string(),
                Some(sweep) => format!("{sweep}: {series}"),
                None => series.to_string(),
            };
            Curve { name, points }
        })
        .collect()
}

/// The three charts of the HP study's figures: IOPS against threads, database read latency and
/// log write latency against IOPS, with the thresholds.
pub fn charts(curves: &[Curve<'_>], db_read_avg_ms: f64, log_write_avg_ms: f64) -> String {
    let make = |f: fn(&Point) -> Option<f64>, g: fn(&Point) -> Option<f64>| -> Vec<Series> {
        curves
            .iter()
            .map(|c| Series {
                name: c.name.clone(),
                points: series_points(&c.points, f, g),
            })
            .collect()
    };
    // The average (what the threshold judges, the study's figure), named "... avg", and the
    // 99th percentile, "... p99".
    let with_p99 = |avg: fn(&Point) -> Option<f64>, p99: fn(&Point) -> Option<f64>| {
        let mut series: Vec<Series> = curves
            .iter()
            .map(|c| Series {
                name: format!("{} avg", c.name),
                points: series_points(&c.points, iops, avg),
            })
            .collect();
        series.extend(curves.iter().map(|c| Series {
            name: format!("{} p99", c.name),
            points: series_points(&c.points, iops, p99),
        }));
        series
    };
    let mut out = String::new();
    let charts = [
        LineChart {
            id: "sweep-iops".into(),
            title: "Transactional IOPS against threads per database".into(),
            x_label: "threads per database".into(),
            y_label: "IOPS".into(),
            series: make(threads_x, iops),
            lines: Vec::new(),
            band: None,
            percentile_x: false,
        },
        LineChart {
            id: "sweep-db-read".into(),
            title: "Database read latency (average, and p99) against IOPS".into(),
            x_label: "transactional IOPS".into(),
            y_label: "ms".into(),
            series: with_p99(db_read_avg, db_read_p99),
            lines: vec![(db_read_avg_ms, format!("threshold {db_read_avg_ms} ms"))],
            band: None,
            percentile_x: false,
        },
        LineChart {
            id: "sweep-log-write".into(),
            title: "Log write latency (average, and p99) against IOPS".into(),
            x_label: "transactional IOPS".into(),
            y_label: "ms".into(),
            series: with_p99(log_write_avg, log_write_p99),
            lines: vec![(log_write_avg_ms, format!("threshold {log_write_avg_ms} ms"))],
            band: None,
            percentile_x: false,
        },
    ];
    for chart in &charts {
        out.push_str(&chart.svg_with_markers(crate::html::MAX_POINTS));
        out.push('\n');
    }
    out
}

fn ms(c: Option<&ClassFigures>, f: fn(&ClassFigures) -> f64) -> String {
    c.map(|c| format!("{:.3}", f(c)))
        .unwrap_or_else(|| "-".into())
}

/// `sweep.md`: the points, `--find-max`'s answer and decisions.
pub fn markdown(doc: &SweepDoc) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# jetproof sweep\n");
    let _ = writeln!(
        md,
        "- State: {}\n- Started: {}\n- Updated: {}\n- Threads per database: {:?} (step {})\n- Thresholds: database read average {} ms, log write average {} ms",
        doc.state,
        doc.started,
        doc.updated,
        doc.threads.values,
        doc.threads.step,
        doc.db_read_avg_ms,
        doc.log_write_avg_ms
    );
    for set in &doc.sets {
        let _ = writeln!(
            md,
            "- Setting swept: {} = {}",
            set.key,
            set.values.join(", ")
        );
    }
    if doc.find_max {
        let _ = writeln!(md, "- Mode: --find-max (grow, then bisect)");
    }
    let _ = writeln!(md, "\n## Points\n");
    let _ = writeln!(
        md,
        "| Series | Threads | Achieved IOPS | DB read avg (ms) | DB read p99 (ms) | DB write avg (ms) | Log write avg (ms) | Log write p99 (ms) | Verdict | Folder |"
    );
    let _ = writeln!(
        md,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for p in &doc.points {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {}{}{} | {} |",
            p.series,
            p.threads,
            p.achieved_iops,
            ms(p.class("db_read"), |c| c.avg_ms),
            ms(p.class("db_read"), |c| c.p99_ms),
            ms(p.class("db_write"), |c| c.avg_ms),
            ms(p.class("log_write"), |c| c.avg_ms),
            ms(p.class("log_write"), |c| c.p99_ms),
            p.verdict,
            if p.interrupted { " (interrupted)" } else { "" },
            if p.resumed { " (resumed)" } else { "" },
            p.dir
        );
    }
    let failing: Vec<&Point> = doc
        .points
        .iter()
        .filter(|p| !p.reasons.is_empty())
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(md, "\n## Reasons\n");
        for p in failing {
            for r in &p.reasons {
                let _ = writeln!(md, "- {} at {} thread(s): {r}", p.series, p.threads);
            }
        }
    }
    if doc.find_max {
        let _ = writeln!(md, "\n## Largest passing thread count\n");
        let _ = writeln!(
            md,
            "| Series | Threads | IOPS | First failing | Points run | Step |"
        );
        let _ = writeln!(md, "| --- | --- | --- | --- | --- | --- |");
        for m in &doc.max {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                m.series,
                m.threads
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "none".into()),
                m.achieved_iops
                    .map(|i| format!("{i:.1}"))
                    .unwrap_or_else(|| "-".into()),
                m.first_failing
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "none in range".into()),
                m.points,
                m.step
            );
        }
        let _ = writeln!(md, "\n## Decisions\n");
        for d in &doc.decisions {
            let _ = writeln!(md, "- {}: {} ({})", d.series, d.decision, d.reason);
        }
    }
    md
}

/// `sweep.html`: the charts, then `sweep.md`'s tables (one self-contained page, the reports'
/// Content-Security-Policy).
pub fn html(doc: &SweepDoc) -> String {
    let tables = crate::html::markdown_to_html(&markdown(doc));
    let charts = charts(&curves(doc, None), doc.db_read_avg_ms, doc.log_write_avg_ms);
    // The charts between the sweep's settings and its tables.
    let body = match tables.find("<h2>") {
        Some(at) => format!("{}{charts}{}", &tables[..at], &tables[at..]),
        None => format!("{tables}{charts}"),
    };
    crate::html::page("jetproof sweep", &body)
}

/// Two or more sweeps overlaid (`jetproof sweep --compare A B ...`): Markdown with, at every
/// thread count of each series they share, each sweep's IOPS and latencies and the difference
/// from the first sweep in percent.
pub fn compare_markdown(sweeps: &[(String, SweepDoc)]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# jetproof sweep comparison\n");
    let Some((base_name, base)) = sweeps.first() else {
        return md;
    };
    for (name, doc) in sweeps {
        let _ = writeln!(
            md,
            "- {name}: {} point(s), state {}, started {}",
            doc.points.len(),
            doc.state,
            doc.started
        );
    }
    let _ = writeln!(
        md,
        "\nDifferences are from {base_name}, in percent, at the same thread count and series.\n"
    );
    let pct = |new: f64, old: f64| {
        if old.abs() < 1e-12 {
            "-".to_string()
        } else {
            format!("{:+.1}%", (new - old) / old * 100.0)
        }
    };
    for (name, doc) in &sweeps[1..] {
        let _ = writeln!(md, "## {name} against {base_name}\n");
        let _ = writeln!(
            md,
            "| Series | Threads | IOPS ({base_name}) | IOPS ({name}) | IOPS change | DB read avg ({base_name}, ms) | DB read avg ({name}, ms) | DB read change | Log write avg ({base_name}, ms) | Log write avg ({name}, ms) | Log write change | Verdicts |"
        );
        let _ = writeln!(
            md,
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for a in &base.points {
            let Some(b) = doc
                .points
                .iter()
                .find(|b| b.series == a.series && b.threads == a.threads && !b.interrupted)
            else {
                continue;
            };
            let avg = |p: &Point, class: &str| p.class(class).map(|c| c.avg_ms);
            let change = |class: &str| match (avg(a, class), avg(b, class)) {
                (Some(x), Some(y)) => pct(y, x),
                _ => "-".into(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
                a.series,
                a.threads,
                a.achieved_iops,
                b.achieved_iops,
                pct(b.achieved_iops, a.achieved_iops),
                ms(a.class("db_read"), |c| c.avg_ms),
                ms(b.class("db_read"), |c| c.avg_ms),
                change("db_read"),
                ms(a.class("log_write"), |c| c.avg_ms),
                ms(b.class("log_write"), |c| c.avg_ms),
                change("log_write"),
                a.verdict,
                b.verdict
            );
        }
        let _ = writeln!(md);
    }
    md
}

/// The comparison as one page: every sweep's curves overlaid in each chart, then the tables.
pub fn compare_html(sweeps: &[(String, SweepDoc)]) -> String {
    let mut all = Vec::new();
    for (name, doc) in sweeps {
        all.extend(curves(doc, Some(name)));
    }
    let (read, log) = sweeps
        .first()
        .map(|(_, d)| (d.db_read_avg_ms, d.log_write_avg_ms))
        .unwrap_or((f64::NAN, f64::NAN));
    let tables = crate::html::markdown_to_html(&compare_markdown(sweeps));
    let charts = charts(&all, read, log);
    let body = match tables.find("<h2>") {
        Some(at) => format!("{}{charts}{}", &tables[..at], &tables[at..]),
        None => format!("{tables}{charts}"),
    };
    crate::html::page("jetproof sweep comparison", &body)
}

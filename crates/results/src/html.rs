//! `report.html`: one self-contained page per result (`docs/report.md`). No script, no network
//! (a Content-Security-Policy that forbids every request), inline CSS, charts as inline SVG
//! (`crate::svg`). The tables are `report.md`'s own, turned into HTML, so the two never
//! disagree; the charts come from `samples.csv` (over time) and from the histograms in
//! `result.json` (distributions).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::aggregate::AggregateResult;
use crate::svg::{LineChart, Series, bars, escape};
use crate::verdict::Limits;
use crate::{TestKind, TestResult, Verdict};

/// Points per drawn series: a 24 h run sampled every second still makes a page well under 2 MB.
pub const MAX_POINTS: usize = 1200;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px}\
pre{white-space:pre-wrap;font-size:.85em;background:#f6f6f6;padding:.5em}th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.verdict{font-size:1.6em;padding:.4em .8em;display:inline-block;border-radius:4px}\
.pass{background:#d7f5d7}.fail{background:#f8d0d0}\
svg.chart{display:block;margin:.5em 0 1.5em;background:#fff;border:1px solid #eee}\
svg .title{font:bold 13px sans-serif;text-anchor:middle}svg .small{font:11px sans-serif}";

/// A whole page: the Content-Security-Policy, the inline style, `body`.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head>\
<body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// Markdown as `report.md` writes it (headings, pipe tables, list items, lines) as HTML, every
/// cell escaped. Not a general Markdown reader: only what the reports emit.
pub fn markdown_to_html(markdown: &str) -> String {
    let mut out = String::new();
    let mut lines = markdown.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "```" || t == "~~~~" {
            // A fenced block (the test log): kept as lines, escaped, never read as Markdown.
            let mut block = Vec::new();
            for next in lines.by_ref() {
                if next.trim() == t {
                    break;
                }
                block.push(escape(next));
            }
            let _ = writeln!(out, "<pre>{}</pre>", block.join("\n"));
        } else if let Some(h) = t.strip_prefix("### ") {
            let _ = writeln!(out, "<h3>{}</h3>", escape(h));
        } else if let Some(h) = t.strip_prefix("## ") {
            let _ = writeln!(out, "<h2>{}</h2>", escape(h));
        } else if let Some(h) = t.strip_prefix("# ") {
            let _ = writeln!(out, "<h1>{}</h1>", escape(h));
        } else if t.starts_with('|') {
            let mut rows = vec![t.to_string()];
            while let Some(next) = lines.peek() {
                if !next.trim().starts_with('|') {
                    break;
                }
                rows.push(next.trim().to_string());
                lines.next();
            }
            table(&rows, &mut out);
        } else if let Some(item) = t.strip_prefix("- ") {
            let _ = writeln!(out, "<ul><li>{}</li></ul>", escape(item));
        } else if !t.is_empty() {
            let _ = writeln!(out, "<p>{}</p>", escape(t));
        }
    }
    out
}

/// The Markdown without its `# ` title, which the page already shows.
fn without_title(markdown: &str) -> String {
    markdown
        .lines()
        .filter(|l| !l.starts_with("# "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

fn table(rows: &[String], out: &mut String) {
    let header = cells(&rows[0]);
    let aligns: Vec<bool> = rows
        .get(1)
        .map(|r| cells(r).iter().map(|c| c.ends_with(":")).collect())
        .unwrap_or_default();
    out.push_str("<table>");
    if header.iter().any(|h| !h.is_empty()) {
        out.push_str("<tr>");
        for h in &header {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>");
    }
    for row in rows.iter().skip(2) {
        out.push_str("<tr>");
        for (i, c) in cells(row).iter().enumerate() {
            if aligns.get(i).copied().unwrap_or(false) {
                let _ = write!(out, "<td class=\"n\">{}</td>", escape(c));
            } else {
                let _ = write!(out, "<td>{}</td>", escape(c));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
}

/// One row of `samples.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleRow {
    pub elapsed_s: f64,
    pub instance: String,
    pub class: String,
    pub count: f64,
    pub ops_per_sec: f64,
    pub avg_latency_ms: f64,
    pub p99_latency_ms: f64,
}

/// Reads `samples.csv` by its header's column names (with or without `wall_clock`); lines that
/// do not parse are skipped.
pub fn parse_samples(text: &str) -> Vec<SampleRow> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let names: Vec<&str> = header.split(',').collect();
    let col = |name: &str| names.iter().position(|n| *n == name);
    let (Some(elapsed), Some(instance), Some(class), Some(count), Some(ops), Some(avg), Some(p99)) = (
        col("elapsed_s"),
        col("instance"),
        col("class"),
        col("count"),
        col("ops_per_sec"),
        col("avg_latency_ms"),
        col("p99_latency_ms"),
    ) else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        let (Some(e), Some(c), Some(o), Some(a), Some(p)) =
            (num(elapsed), num(count), num(ops), num(avg), num(p99))
        else {
            continue;
        };
        rows.push(SampleRow {
            elapsed_s: e,
            instance: f.get(instance).unwrap_or(&"").to_string(),
            class: f.get(class).unwrap_or(&"").to_string(),
            count: c,
            ops_per_sec: o,
            avg_latency_ms: a,
            p99_latency_ms: p,
        });
    }
    rows
}

fn limits(result: &TestResult) -> Option<Limits> {
    result.parameters.limits
}

fn seconds_between(a: &str, b: &str) -> Option<f64> {
    let a = humantime::parse_rfc3339_weak(a.trim_end_matches('Z')).ok()?;
    let b = humantime::parse_rfc3339_weak(b.trim_end_matches('Z')).ok()?;
    Some(b.duration_since(a).ok()?.as_secs_f64())
}

/// The intervals of `samples` where `instance`'s `class` averaged above `limit`, as text.
fn intervals_above(samples: &[SampleRow], instance: &str, class: &str, limit: f64) -> String {
    let above: Vec<f64> = samples
        .iter()
        .filter(|r| r.instance == instance && r.class == class && r.avg_latency_ms > limit)
        .map(|r| r.elapsed_s)
        .collect();
    match (above.first(), above.last()) {
        (Some(first), Some(last)) => format!(
            "{} of the sample intervals, the first ending at {first} s, the last at {last} s",
            above.len()
        ),
        _ => "the whole window (no single interval above)".into(),
    }
}

/// Each broken rule, as the verdict judged it (`verdict::reasons`), with its threshold, the
/// observed value and where in the window it happened.
fn broken_rules(result: &TestResult, samples: &[SampleRow]) -> Vec<[String; 5]> {
    let mut rows = Vec::new();
    let Some(limits) = limits(result) else {
        return rows;
    };
    for instance in &result.instances {
        for (key, words, avg_limit, max_limit) in [
            (
                "db_read",
                "I/O Database Reads Average Latency",
                limits.db_read_avg_ms,
                limits.db_read_max_ms,
            ),
            (
                "log_write",
                "I/O Log Writes Average Latency",
                limits.log_write_avg_ms,
                limits.log_write_max_ms,
            ),
        ] {
            let Some(class) = instance.io.get(key) else {
                continue;
            };
            if class.avg_latency_ms > avg_limit {
                rows.push([
                    instance.name.clone(),
                    format!("{words} (average)"),
                    format!("{avg_limit} ms"),
                    format!("{:.3} ms", class.avg_latency_ms),
                    intervals_above(samples, &instance.name, key, avg_limit),
                ]);
            }
            if let Some(max) = class.max_interval_avg_ms
                && max > max_limit
            {
                rows.push([
                    instance.name.clone(),
                    format!("{words} (maximum of the interval averages)"),
                    format!("{max_limit} ms"),
                    format!("{max:.3} ms"),
                    intervals_above(samples, &instance.name, key, max_limit),
                ]);
            }
        }
    }
    if let Some(stalls) = result
        .host_counters
        .as_ref()
        .and_then(|c| c.database_page_fault_stalls_per_sec)
        && stalls.average > limits.page_fault_stalls_per_sec
    {
        rows.push([
            "all".into(),
            "Database Page Fault Stalls/sec (average)".into(),
            format!("{}", limits.page_fault_stalls_per_sec),
            format!("{:.3}", stalls.average),
            "the whole window".into(),
        ]);
    }
    if let (Some(target), Some(achieved)) = (result.target_iops, result.achieved_iops)
        && achieved < target
    {
        rows.push([
            "all".into(),
            "Achieved Transactional I/O per Second".into(),
            format!("{target:.1}"),
            format!("{achieved:.1}"),
            "the whole window".into(),
        ]);
    }
    rows
}

fn verdict_block(verdict: Verdict, reasons: &[String], out: &mut String) {
    let (class, word) = match verdict {
        Verdict::Pass => ("pass", "Pass"),
        Verdict::Fail => ("fail", "Fail"),
    };
    let _ = writeln!(
        out,
        "<p class=\"verdict {class}\" id=\"verdict\">Overall Test Result: {word}</p>"
    );
    if !reasons.is_empty() {
        out.push_str("<ul id=\"reasons\">");
        for r in reasons {
            let _ = write!(out, "<li>{}</li>", escape(r));
        }
        out.push_str("</ul>\n");
    }
}

/// Over-time series per class: (elapsed, ops/s summed over instances, I/O-weighted average
/// latency, highest instance p99).
pub(crate) fn over_time(samples: &[SampleRow], class: &str) -> Vec<(f64, f64, f64, f64)> {
    let mut by_time: BTreeMap<u64, (f64, f64, f64, f64, f64)> = BTreeMap::new();
    for r in samples.iter().filter(|r| r.class == class) {
        let e = by_time
            .entry((r.elapsed_s * 1000.0).round() as u64)
            .or_insert((r.elapsed_s, 0.0, 0.0, 0.0, 0.0));
        e.1 += r.ops_per_sec;
        e.2 += r.avg_latency_ms * r.count;
        e.3 += r.count;
        e.4 = e.4.max(r.p99_latency_ms);
    }
    by_time
        .values()
        .map(|&(t, ops, weighted, count, p99)| {
            (
                t,
                ops,
                if count > 0.0 { weighted / count } else { 0.0 },
                p99,
            )
        })
        .collect()
}

pub(crate) const CLASS_NAMES: [(&str, &str); 6] = [
    ("db_read", "Database Reads"),
    ("db_write", "Database Writes"),
    ("log_write", "Log Writes"),
    ("log_read", "Log Reads"),
    ("bdm_read", "Background Maintenance Reads"),
    ("replication_read", "Log Replication Reads"),
];

fn charts_over_time(result: &TestResult, samples: &[SampleRow], out: &mut String) {
    if samples.is_empty() {
        return;
    }
    let warm_up = match (&result.measured_start, result.started.as_str()) {
        (Some(start), started) => seconds_between(started, start).filter(|s| *s > 0.0),
        _ => None,
    };
    let band = warm_up.map(|w| (-w, 0.0, "warm-up (not sampled)".to_string()));
    out.push_str("<h2>Over Time</h2>\n");
    // The marks of `jetproof mark`, a vertical line each (issue 37).
    let events: Vec<(f64, String)> = match &result.totals {
        crate::Totals::Workload(t) => t
            .marks
            .iter()
            .map(|m| (m.elapsed_s, m.label.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let reads = over_time(samples, "db_read");
    let writes = over_time(samples, "db_write");
    let mut iops: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for (t, ops, _, _) in reads.iter().chain(&writes) {
        let e = iops.entry((t * 1000.0).round() as u64).or_insert((*t, 0.0));
        e.1 += ops;
    }
    let mut lines = Vec::new();
    if let Some(target) = result.target_iops {
        lines.push((target, format!("target {target:.1}")));
    }
    let chart = LineChart {
        id: "iops".into(),
        title: "Transactional I/O per Second".into(),
        x_label: "seconds into the measured window".into(),
        y_label: "IOPS".into(),
        series: vec![Series {
            name: "transactional IOPS".into(),
            points: iops.values().copied().collect(),
        }],
        lines,
        band: band.clone(),
        percentile_x: false,
    };
    out.push_str(&chart.svg_with_events(MAX_POINTS, &events));
    let limits = limits(result);
    for (key, name) in CLASS_NAMES {
        let series = over_time(samples, key);
        if series.is_empty() {
            continue;
        }
        let mut lines = Vec::new();
        match (key, &limits) {
            ("db_read", Some(l)) => {
                lines.push((
                    l.db_read_avg_ms,
                    format!("average limit {} ms", l.db_read_avg_ms),
                ));
            }
            ("log_write", Some(l)) => {
                lines.push((
                    l.log_write_avg_ms,
                    format!("average limit {} ms", l.log_write_avg_ms),
                ));
            }
            _ => {}
        }
        // A limit far above the data would flatten the lines: draw it only when near them.
        let top = series.iter().map(|s| s.3).fold(0.0, f64::max);
        lines.retain(|(y, _)| *y <= top * 4.0);
        let chart = LineChart {
            id: format!("latency-{key}"),
            title: format!("{name}: latency per sample interval"),
            x_label: "seconds into the measured window".into(),
            y_label: "ms".into(),
            series: vec![
                Series {
                    name: "average".into(),
                    points: series.iter().map(|s| (s.0, s.2)).collect(),
                },
                Series {
                    name: "p99 (highest instance)".into(),
                    points: series.iter().map(|s| (s.0, s.3)).collect(),
                },
            ],
            lines,
            band: band.clone(),
            percentile_x: false,
        };
        out.push_str(&chart.svg_with_events(MAX_POINTS, &events));
    }
}

/// Recovery: each instance's log MB read per second per sample interval (`replay_samples`),
/// one series per instance; nothing for results without them (older ones, other tests).
fn replay_over_time(result: &TestResult, out: &mut String) {
    if result.test != TestKind::Recovery {
        return;
    }
    let series: Vec<Series> = result
        .instances
        .iter()
        .filter_map(|i| {
            let samples = &i.figures.recovery()?.replay_samples;
            (!samples.is_empty()).then(|| Series {
                name: i.name.clone(),
                points: samples
                    .iter()
                    .map(|s| (s.elapsed_s, s.log_read_mb_per_sec))
                    .collect(),
            })
        })
        .collect();
    if series.is_empty() {
        return;
    }
    // A short replay has a few intervals: a dot on each, or a lone one would not show.
    let few = series.iter().all(|s| s.points.len() <= 30);
    let chart = LineChart {
        id: "replay-log-read".into(),
        title: "Replay: log MB read per second per sample interval".into(),
        x_label: "seconds into the replay".into(),
        y_label: "MB/s".into(),
        series,
        lines: Vec::new(),
        band: None,
        percentile_x: false,
    };
    out.push_str("<h2>Replay Over Time</h2>\n");
    out.push_str(&if few {
        chart.svg_with_markers(MAX_POINTS)
    } else {
        chart.svg(MAX_POINTS)
    });
}

/// A histogram's percentile curve: (nines, ms), x = -log10(1 - q) in steps of 0.05, up to the
/// quantile one I/O in the record stands for (at most 99.999%).
pub(crate) fn percentile_points(hist: &jetproof_io::hist::LatencyHistogram) -> Vec<(f64, f64)> {
    let deepest = (hist.count as f64).log10().min(5.0);
    let mut points = Vec::new();
    let mut k = 0.0;
    while k <= deepest + 1e-9 {
        let q = 1.0 - 10f64.powf(-k);
        points.push((k, hist.value_at_quantile_ns(q) as f64 / 1e6));
        k += 0.05;
    }
    points
}

/// The percentile curve of each class (all instances' histograms merged exactly), x on a log
/// axis of nines.
fn distribution_charts(
    classes: &BTreeMap<String, jetproof_io::hist::LatencyHistogram>,
    out: &mut String,
) {
    if classes.is_empty() {
        return;
    }
    out.push_str("<h2>Latency Distribution Curves</h2>\n");
    for (key, hist) in classes {
        if hist.count == 0 {
            continue;
        }
        let points = percentile_points(hist);
        let name = CLASS_NAMES
            .iter()
            .find(|c| c.0 == key)
            .map(|c| c.1)
            .unwrap_or(key.as_str());
        let chart = LineChart {
            id: format!("distribution-{key}"),
            title: format!("{name}: latency by percentile ({} I/Os)", hist.count),
            x_label: "percentile (log scale)".into(),
            y_label: "ms".into(),
            series: vec![Series {
                name: key.clone(),
                points,
            }],
            lines: vec![],
            band: None,
            percentile_x: true,
        };
        out.push_str(&chart.svg(MAX_POINTS));
    }
}

fn instance_bars(result: &TestResult, out: &mut String) {
    let named = |f: &dyn Fn(&crate::InstanceResult) -> Option<f64>| -> Vec<(String, f64)> {
        result
            .instances
            .iter()
            .filter_map(|i| f(i).map(|v| (i.name.clone(), v)))
            .collect()
    };
    let mut charts = Vec::new();
    let iops = named(&|i| i.figures.workload().map(|w| w.achieved_iops));
    if !iops.is_empty() {
        charts.push(bars(
            "instance-iops",
            "Transactional I/O per Second per instance",
            "IOPS",
            &iops,
        ));
    }
    for (key, name) in [("db_read", "Database Reads"), ("log_write", "Log Writes")] {
        let v = named(&|i| i.io.get(key).map(|c| c.avg_latency_ms));
        if !v.is_empty() && matches!(result.test, TestKind::Performance | TestKind::Stress) {
            charts.push(bars(
                &format!("instance-{key}"),
                &format!("{name} Average Latency per instance"),
                "ms",
                &v,
            ));
        }
    }
    let backup = named(&|i| i.figures.backup().map(|b| b.backup.mb_per_sec));
    if !backup.is_empty() {
        charts.push(bars(
            "instance-backup",
            "Backup MB read per second per instance",
            "MB/s",
            &backup,
        ));
    }
    if result.test == TestKind::Recovery {
        let replay = |i: &crate::InstanceResult| i.figures.recovery()?.replay.clone();
        let logs = named(&|i| replay(i).map(|r| r.logs_replayed as f64));
        if !logs.is_empty() {
            charts.push(bars(
                "instance-logs",
                "Logs replayed per instance",
                "log files",
                &logs,
            ));
        }
        let per_log = named(&|i| replay(i).map(|r| r.seconds_per_log));
        if !per_log.is_empty() {
            charts.push(bars(
                "instance-seconds-per-log",
                "Replay: seconds per log file per instance",
                "s",
                &per_log,
            ));
        }
        let rate = named(&|i| {
            let r = replay(i)?;
            (r.seconds > 0.0).then(|| r.records_applied as f64 / r.seconds)
        });
        if !rate.is_empty() {
            charts.push(bars(
                "instance-replay-rate",
                "Replay rate: records applied per second per instance",
                "records/s",
                &rate,
            ));
        }
    }
    let seen = named(&|i| i.figures.checksum().map(|c| c.file.pages_seen as f64));
    if !seen.is_empty() {
        charts.push(bars(
            "instance-pages",
            "Checksum: pages seen per instance",
            "pages",
            &seen,
        ));
    }
    if !charts.is_empty() {
        out.push_str("<h2>Per Instance</h2>\n");
        for c in charts {
            out.push_str(&c);
        }
    }
}

/// Checksum (and stress's checksum pass): every damaged page the result lists.
fn damaged_pages(result: &TestResult, out: &mut String) {
    let mut rows = Vec::new();
    for instance in &result.instances {
        if let Some(c) = instance.figures.checksum() {
            for p in &c.file.damaged_pages {
                rows.push((instance.name.clone(), p));
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("<h2>Damaged Pages</h2>\n<table id=\"damaged-pages\"><tr><th>Instance</th><th>Page</th><th>Kind</th><th>Details</th></tr>");
    for (name, p) in rows {
        let mut details = Vec::new();
        if let Some(found) = p.found_page_number {
            details.push(format!("found_page_number {found}"));
        }
        if let Some(bit) = p.bit {
            details.push(format!("bit {bit}"));
        }
        if let Some(expected) = p.expected_write_count {
            details.push(format!("expected_write_count {expected}"));
        }
        if let Some(found) = p.found_write_count {
            details.push(format!("found_write_count {found}"));
        }
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&name),
            p.page_number,
            escape(p.damage.name()),
            escape(&details.join(", "))
        );
    }
    out.push_str("</table>\n");
}

/// `report.html` of one result; `samples` is its `samples.csv` when it has one.
pub fn report(result: &TestResult, samples: Option<&str>) -> String {
    let samples = samples.map(parse_samples).unwrap_or_default();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<h1>jetproof {} test report</h1>",
        escape(result.test.name())
    );
    verdict_block(result.verdict, &result.reasons, &mut body);
    let rules = broken_rules(result, &samples);
    if !rules.is_empty() {
        body.push_str("<h2>Broken Rules</h2>\n<table id=\"broken-rules\"><tr><th>Instance</th><th>Rule</th><th>Threshold</th><th>Observed</th><th>Where</th></tr>");
        for row in rules {
            body.push_str("<tr>");
            for cell in row {
                let _ = write!(body, "<td>{}</td>", escape(&cell));
            }
            body.push_str("</tr>");
        }
        body.push_str("</table>\n");
    }
    charts_over_time(result, &samples, &mut body);
    replay_over_time(result, &mut body);
    let mut merged: BTreeMap<String, jetproof_io::hist::LatencyHistogram> = BTreeMap::new();
    for instance in &result.instances {
        for (key, class) in &instance.io {
            if let Some(h) = &class.histogram {
                merged.entry(key.clone()).or_default().merge(&h.latency);
            }
        }
    }
    distribution_charts(&merged, &mut body);
    instance_bars(result, &mut body);
    damaged_pages(result, &mut body);
    body.push_str("<hr>\n");
    body.push_str(&markdown_to_html(&without_title(&crate::report::markdown(
        result,
    ))));
    page(
        &format!("jetproof {} test report", result.test.name()),
        &body,
    )
}

/// `report.html` of a `jetproof aggregate` result.
pub fn aggregate_report(result: &AggregateResult) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<h1>jetproof aggregate {} test report</h1>",
        escape(result.test.name())
    );
    verdict_block(result.verdict, &result.reasons, &mut body);
    body.push_str("<h2>Per Host</h2>\n");
    let iops: Vec<(String, f64)> = result
        .hosts
        .iter()
        .filter_map(|h| h.achieved_iops.map(|v| (h.name.clone(), v)))
        .collect();
    if !iops.is_empty() {
        body.push_str(&bars(
            "host-iops",
            "Achieved Transactional I/O per Second per host",
            "IOPS",
            &iops,
        ));
    }
    let read: Vec<(String, f64)> = result
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.server.database_read_avg_latency_ms))
        .collect();
    if matches!(result.test, TestKind::Performance | TestKind::Stress) {
        body.push_str(&bars(
            "host-db-read",
            "Database Reads Average Latency per host",
            "ms",
            &read,
        ));
    }
    let merged: BTreeMap<String, jetproof_io::hist::LatencyHistogram> = result
        .totals
        .iter()
        .filter_map(|(k, c)| c.histogram.as_ref().map(|h| (k.clone(), h.latency.clone())))
        .collect();
    distribution_charts(&merged, &mut body);
    body.push_str("<hr>\n");
    body.push_str(&markdown_to_html(&without_title(
        &crate::aggregate::markdown(result),
    )));
    page(
        &format!("jetproof aggregate {} test report", result.test.name()),
        &body,
    )
}

/// `report.html` from the text of a `result.json` (a host's or an aggregate's) and its
/// `samples.csv`.
pub fn report_from_json(json: &str, samples: Option<&str>) -> Result<String, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(json)?;
    if value.get("aggregate") == Some(&serde_json::Value::Bool(true)) {
        let a: AggregateResult = serde_json::from_value(value)?;
        Ok(aggregate_report(&a))
    } else {
        let r: TestResult = serde_json::from_value(value)?;
        Ok(report(&r, samples))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_test_log_is_preformatted_never_read_as_markdown() {
        let html = markdown_to_html(
            "## Test Log\n\n```\n| not a table |\n- not a list <b>\n```\n\n- after\n",
        );
        assert!(
            html.contains("<pre>| not a table |\n- not a list &lt;b&gt;</pre>"),
            "{html}"
        );
        assert!(!html.contains("<table>"), "{html}");
        assert!(html.contains("<li>after</li>"), "{html}");
    }

    #[test]
    fn markdown_tables_become_escaped_html() {
        let html = markdown_to_html("# T\n\n| a | b |\n| --- | ---: |\n| <x> | 1.5 |\n\n- r & s\n");
        assert!(html.contains("<h1>T</h1>"), "{html}");
        assert!(html.contains("<th>a</th><th>b</th>"), "{html}");
        assert!(
            html.contains("<td>&lt;x&gt;</td><td class=\"n\">1.5</td>"),
            "{html}"
        );
        assert!(html.contains("<li>r &amp; s</li>"), "{html}");
    }

    #[test]
    fn samples_are_read_by_column_name() {
        let text = "elapsed_s,wall_clock,instance,class,count,ops_per_sec,bytes_per_sec,avg_latency_ms,p99_latency_ms,max_latency_ms,cpu_percent,available_memory_mb\n\
                    0.5,2026-11-27T00:30:51.054Z,db1,db_read,10,20.0,1.0,2.5,4.0,5.0,1,1\n\
                    1.0,2026-11-27T00:30:51.554Z,db1,db_read,30,60.0,1.0,1.5,3.0,5.0,1,1\n\
                    1.0,x,db2,db_read,10,20.0,1.0,3.5,9.0,5.0,1,1\n";
        let rows = parse_samples(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].instance, "db1");
        let series = over_time(&rows, "db_read");
        assert_eq!(series.len(), 2);
        assert_eq!(series[1].1, 80.0);
        // I/O-weighted: (30 × 1.5 + 10 × 3.5) / 40.
        assert!((series[1].2 - 2.0).abs() < 1e-12, "{series:?}");
        assert_eq!(series[1].3, 9.0);
        assert_eq!(
            intervals_above(&rows, "db1", "db_read", 2.0),
            "1 of the sample intervals, the first ending at 0.5 s, the last at 0.5 s"
        );
    }

    /// A day of samples every second, two instances, four classes.
    pub(crate) fn day_of_samples() -> String {
        let mut csv = String::from(
            "elapsed_s,wall_clock,instance,class,count,ops_per_sec,bytes_per_sec,avg_latency_ms,p99_latency_ms,max_latency_ms,cpu_percent,available_memory_mb\n",
        );
        for t in 1..=86_400u32 {
            for db in ["db1", "db2"] {
                for (class, base) in [
                    ("db_read", 8.0),
                    ("db_write", 3.0),
                    ("log_write", 1.0),
                    ("bdm_read", 2.0),
                ] {
                    let wobble = f64::from(t % 97) / 97.0;
                    let _ = writeln!(
                        csv,
                        "{t},2026-11-26T00:00:00.000Z,{db},{class},500,500.000,4096000.0,{:.4},{:.4},{:.4},10,1000",
                        base + wobble,
                        base * 3.0 + wobble,
                        base * 9.0
                    );
                }
            }
        }
        csv
    }

    /// The damaged pages of the checksum fixture's first file, as `result.json` holds them.
    #[test]
    fn damaged_pages_show_their_number_kind_and_details() {
        use crate::checksum::{Damage, DamagedPage};
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/checksum.json");
        let mut r: TestResult =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("reads");
        let Some(crate::InstanceFigures::Checksum(c)) =
            r.instances.first_mut().map(|i| &mut i.figures)
        else {
            panic!("a checksum instance");
        };
        c.file.damaged_pages = vec![DamagedPage {
            page_number: 77,
            damage: Damage::Correctable,
            found_page_number: None,
            bit: Some(12345),
            expected_write_count: None,
            found_write_count: None,
        }];
        let html = report(&r, None);
        assert!(
            html.contains("<td class=\"n\">77</td><td>correctable</td><td>bit 12345</td>"),
            "{html}"
        );
    }

    fn result_with_hostile_strings() -> TestResult {
        let mut r = TestResult::new(
            TestKind::Performance,
            "2026-11-26T00:00:00Z".into(),
            86_460.0,
            serde_json::from_value(
                serde_json::json!({"limits": {"db_read_avg_ms": 5.0, "db_read_max_ms": 100.0,
                "log_write_avg_ms": 10.0, "log_write_max_ms": 100.0}}),
            )
            .expect("parameters"),
        );
        r.host.name = "<script>alert(1)</script>".into();
        r.measured_start = Some("2026-11-26T00:01:00.000Z".into());
        r.target_iops = Some(2000.0);
        r.achieved_iops = Some(2000.0);
        r.set_reasons(vec!["db1: <b>bold</b> & \"quoted\"".into()]);
        r
    }

    #[test]
    fn strings_from_the_result_are_escaped_and_the_page_asks_for_nothing() {
        let html = report(&result_with_hostile_strings(), None);
        assert!(!html.contains("<script"), "no script element");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("db1: &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;"));
        assert!(html.contains("default-src 'none'; style-src 'unsafe-inline'; img-src data:"));
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        let verdict = html.find("id=\"verdict\"").expect("a verdict");
        let table = html.find("<table").expect("tables");
        assert!(verdict < table, "the verdict comes first");
    }

    #[test]
    fn a_day_of_one_second_samples_makes_a_page_under_2_mb() {
        let csv = day_of_samples();
        let html = report(&result_with_hostile_strings(), Some(&csv));
        assert!(html.len() < 2_000_000, "{} bytes", html.len());
        // Every over-time chart drew, each series within the point budget.
        for id in [
            "iops",
            "latency-db_read",
            "latency-log_write",
            "latency-bdm_read",
        ] {
            assert!(html.contains(&format!("data-chart=\"{id}\"")), "{id}");
        }
        for n in html.split("data-points=\"").skip(1) {
            let n: usize = n
                .split('"')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            assert!(n > 0 && n <= MAX_POINTS, "{n}");
        }
        // The warm-up (a minute from the test's start to the window's) is shaded.
        assert!(html.contains("class=\"band\""));
        // The 5 ms limit is drawn on the reads' chart (the data is near it).
        assert!(html.contains("average limit 5 ms"));
    }

    #[test]
    fn a_recovery_with_replay_samples_draws_each_instances_log_read_rate_over_time() {
        use crate::sections::{RecoveryInstance, ReplaySample};
        let mut r = TestResult::new(
            TestKind::Recovery,
            "2026-11-27T00:00:00Z".into(),
            3.0,
            crate::Parameters::default(),
        );
        let instance = |name: &str, samples: Vec<ReplaySample>| crate::InstanceResult {
            name: name.into(),
            database_path: format!("/{name}").into(),
            log_path: format!("/{name}-log").into(),
            io: BTreeMap::new(),
            figures: crate::InstanceFigures::Recovery(Box::new(RecoveryInstance {
                replay_samples: samples,
                ..RecoveryInstance::default()
            })),
        };
        let sample = |elapsed_s: f64, mbps: f64| ReplaySample {
            elapsed_s,
            interval_s: 1.0,
            log_read_mb_per_sec: mbps,
            ..ReplaySample::default()
        };
        // An older result: no samples, no chart.
        r.instances = vec![instance("db1", Vec::new())];
        assert!(!report(&r, None).contains("data-chart=\"replay-log-read\""));
        r.instances = vec![
            instance("db1", vec![sample(1.0, 12.5), sample(1.4, 3.25)]),
            instance("db2", vec![sample(0.6, 7.75)]),
        ];
        let html = report(&r, None);
        let chart = html
            .split("data-chart=\"replay-log-read\"")
            .nth(1)
            .and_then(|c| c.split("</svg>").next())
            .expect("the replay chart");
        assert!(
            chart.contains("data-series=\"db1\" data-points=\"2\""),
            "{chart}"
        );
        assert!(
            chart.contains("data-series=\"db2\" data-points=\"1\""),
            "{chart}"
        );
        // The lone interval of db2 still shows: a dot on each point.
        assert_eq!(chart.matches("class=\"marker\"").count(), 3, "{chart}");
    }
}

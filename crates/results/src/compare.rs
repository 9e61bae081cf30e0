//! `jetproof compare BASE NEW`: two results of the same test side by side (`docs/report.md`,
//! "compare"): each figure of both, the change in percent, and whether the change is inside the
//! base run's own interval-to-interval noise (from its `samples.csv`). Two aggregates
//! ([`aggregate_markdown`]): the whole solution's figures, then each server's.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::aggregate::AggregateResult;
use crate::html::{SampleRow, parse_samples};
use crate::{ClassSummary, TestResult, Totals, Verdict};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    #[error("NEW is a {new} result, but BASE is a {base} result: compare results of the same test")]
    DifferentTests { base: String, new: String },
}

/// One class over all instances: I/Os, rate, I/O-weighted average, p99 of the merged
/// histograms (the highest instance p99 when a result has no histograms).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Class {
    count: u64,
    ops_per_sec: f64,
    avg_ms: f64,
    p99_ms: f64,
}

fn classes(result: &TestResult) -> BTreeMap<String, Class> {
    classes_of(result.instances.iter().map(|i| &i.io))
}

/// [`classes`] of instances given by their I/O classes (a result's, or an aggregate host's,
/// whose histograms stay in the host's own result: its p99 is the highest instance p99).
fn classes_of<'a>(
    instances: impl Iterator<Item = &'a BTreeMap<String, ClassSummary>>,
) -> BTreeMap<String, Class> {
    let mut sums: BTreeMap<String, (Class, f64, Option<jetproof_io::hist::LatencyHistogram>)> =
        BTreeMap::new();
    for io in instances {
        for (key, c) in io {
            let e = sums.entry(key.clone()).or_insert((
                Class::default(),
                0.0,
                Some(Default::default()),
            ));
            e.0.count += c.count;
            e.0.ops_per_sec += c.ops_per_sec;
            e.0.p99_ms = e.0.p99_ms.max(c.p99_ms);
            e.1 += c.avg_latency_ms * c.count as f64;
            match (&mut e.2, &c.histogram) {
                (Some(h), Some(s)) => h.merge(&s.latency),
                (slot, _) => *slot = None,
            }
        }
    }
    sums.into_iter()
        .map(|(k, (mut c, weighted, hist))| {
            c.avg_ms = if c.count > 0 {
                weighted / c.count as f64
            } else {
                0.0
            };
            if let Some(h) = hist.filter(|h| h.count > 0) {
                c.p99_ms = h.value_at_quantile_ns(0.99) as f64 / 1e6;
            }
            (k, c)
        })
        .collect()
}

/// Relative standard deviation (in percent) of per-interval values.
fn noise(values: &[f64]) -> Option<f64> {
    if values.len() < 3 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(var.sqrt() / mean * 100.0)
}

/// Per class: sum of latency × count, and count.
type ClassSums = BTreeMap<String, (f64, f64)>;

/// Per-interval transactional IOPS and each class's I/O-weighted average latency.
fn interval_series(samples: &[SampleRow]) -> (Vec<f64>, BTreeMap<String, Vec<f64>>) {
    let mut by_time: BTreeMap<u64, (f64, ClassSums)> = BTreeMap::new();
    for r in samples {
        let e = by_time
            .entry((r.elapsed_s * 1000.0).round() as u64)
            .or_default();
        if r.class == "db_read" || r.class == "db_write" {
            e.0 += r.ops_per_sec;
        }
        let c = e.1.entry(r.class.clone()).or_default();
        c.0 += r.avg_latency_ms * r.count;
        c.1 += r.count;
    }
    let iops = by_time.values().map(|v| v.0).collect();
    let mut latency: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (_, classes) in by_time.values() {
        for (k, (w, n)) in classes {
            if *n > 0.0 {
                latency.entry(k.clone()).or_default().push(w / n);
            }
        }
    }
    (iops, latency)
}

fn change(base: f64, new: f64) -> Option<f64> {
    (base != 0.0).then(|| (new - base) / base * 100.0)
}

fn row(out: &mut String, figure: &str, base: f64, new: f64, digits: usize, noise: Option<f64>) {
    let (pct, note) = match change(base, new) {
        Some(p) => {
            let note = match noise {
                Some(n) if p.abs() <= 2.0 * n => {
                    format!("inside the noise (base intervals vary ±{n:.1}%)")
                }
                Some(n) => format!("beyond the noise (±{n:.1}%)"),
                None => "-".into(),
            };
            (format!("{p:+.1}%"), note)
        }
        None => ("-".into(), "-".into()),
    };
    let _ = writeln!(
        out,
        "| {figure} | {base:.digits$} | {new:.digits$} | {pct} | {note} |"
    );
}

/// The comparison as Markdown. Refuses results of different tests.
pub fn markdown(
    base: &TestResult,
    new: &TestResult,
    base_samples: Option<&str>,
    names: (&str, &str),
) -> Result<String, CompareError> {
    if base.test != new.test {
        return Err(CompareError::DifferentTests {
            base: base.test.name().into(),
            new: new.test.name().into(),
        });
    }
    let samples = base_samples.map(parse_samples).unwrap_or_default();
    let (iops_series, latency_series) = interval_series(&samples);
    let verdict = |r: &TestResult| match r.verdict {
        Verdict::Pass => "Pass",
        Verdict::Fail => "Fail",
    };
    let mut out = String::new();
    let _ = writeln!(out, "# jetproof {} test: comparison\n", base.test.name());
    let _ = writeln!(out, "## Runs\n");
    let _ = writeln!(out, "| | BASE | NEW |\n| --- | --- | --- |");
    let _ = writeln!(out, "| Results | {} | {} |", names.0, names.1);
    let _ = writeln!(
        out,
        "| Machine Name | {} | {} |",
        base.host.name, new.host.name
    );
    let _ = writeln!(
        out,
        "| Test Start Time | {} | {} |",
        base.started, new.started
    );
    let _ = writeln!(
        out,
        "| Overall Test Result | {} | {} |",
        verdict(base),
        verdict(new)
    );
    out.push('\n');
    let _ = writeln!(out, "## Figures\n");
    let _ = writeln!(
        out,
        "A change is *inside the noise* when it is at most twice the relative standard deviation of \
         BASE's own sample intervals (from its samples.csv).\n"
    );
    let _ = writeln!(
        out,
        "| Figure | BASE | NEW | Change | Noise |\n| --- | ---: | ---: | ---: | --- |"
    );
    if let (Some(b), Some(n)) = (base.achieved_iops, new.achieved_iops) {
        row(
            &mut out,
            "Achieved Transactional I/O per Second",
            b,
            n,
            3,
            noise(&iops_series),
        );
    }
    class_rows(&mut out, &classes(base), &classes(new), &latency_series);
    out.push('\n');
    Ok(out)
}

/// The rows of every class both have (I/Os, rate, average and p99), then a row for each class
/// only one has; a class's average latency gets a noise note from `latency_series`.
fn class_rows(
    out: &mut String,
    b: &BTreeMap<String, Class>,
    n: &BTreeMap<String, Class>,
    latency_series: &BTreeMap<String, Vec<f64>>,
) {
    for (key, bc) in b {
        let Some(nc) = n.get(key) else { continue };
        let class_noise = latency_series.get(key).and_then(|v| noise(v));
        row(
            out,
            &format!("{key} I/Os"),
            bc.count as f64,
            nc.count as f64,
            0,
            None,
        );
        row(
            out,
            &format!("{key} I/O per second"),
            bc.ops_per_sec,
            nc.ops_per_sec,
            3,
            None,
        );
        row(
            out,
            &format!("{key} average latency (msec)"),
            bc.avg_ms,
            nc.avg_ms,
            3,
            class_noise,
        );
        row(
            out,
            &format!("{key} p99 latency (msec)"),
            bc.p99_ms,
            nc.p99_ms,
            3,
            None,
        );
    }
    for (key, _) in n.iter().filter(|(k, _)| !b.contains_key(*k)) {
        let _ = writeln!(out, "| {key} | - | present | - | - |");
    }
    for (key, _) in b.iter().filter(|(k, _)| !n.contains_key(*k)) {
        let _ = writeln!(out, "| {key} | present | - | - | - |");
    }
}

/// One of a test's own figures (backup's rate, recovery's logs, a checksum pass's pages).
struct Figure {
    name: &'static str,
    value: f64,
    digits: usize,
    /// A sum over servers means something (a rate, a count; not seconds).
    additive: bool,
}

/// A server's test-specific figures, from its typed totals.
fn test_figures(totals: &Totals) -> Vec<Figure> {
    let figure = |name, value, digits, additive| Figure {
        name,
        value,
        digits,
        additive,
    };
    let mut figures = Vec::new();
    if let Some(b) = totals.backup() {
        figures.push(figure("Backup MB read per second", b.mb_per_sec, 1, true));
        figures.push(figure("Backup seconds", b.seconds, 3, false));
    }
    if let Some(r) = totals.recovery() {
        figures.push(figure("Logs replayed", r.logs_replayed as f64, 0, true));
        figures.push(figure("Recovery seconds", r.recovery_seconds, 3, false));
    }
    if let Some(c) = totals.checksum() {
        figures.push(figure("Checksum pages seen", c.pages_seen as f64, 0, true));
        figures.push(figure("Checksum bad pages", c.pages_bad as f64, 0, true));
        figures.push(figure("Checksum seconds", c.seconds, 3, false));
    }
    figures
}

/// A row for each figure both have, its name followed by `suffix`.
fn figure_rows(out: &mut String, b: &[Figure], n: &[Figure], suffix: &str) {
    for bf in b {
        if let Some(nf) = n.iter().find(|f| f.name == bf.name) {
            row(
                out,
                &format!("{}{suffix}", bf.name),
                bf.value,
                nf.value,
                bf.digits,
                None,
            );
        }
    }
}

const FIGURES_HEADER: &str =
    "| Figure | BASE | NEW | Change | Noise |\n| --- | ---: | ---: | ---: | --- |";

fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "Pass",
        Verdict::Fail => "Fail",
    }
}

/// Two aggregates (`jetproof aggregate`) side by side: the runs, the whole solution (achieved
/// IOPS summed over the servers, every class of the aggregate's `totals`: histograms merged
/// exactly over every instance of every server; the test's own rates and counts summed), then
/// each server both have (matched by name: its achieved IOPS, its classes over its instances,
/// its test's own figures: backup MB/s and seconds, logs replayed and recovery seconds, a
/// checksum pass's pages and seconds). An aggregate has no `samples.csv`, so there is no noise
/// note. Refuses aggregates of different tests.
pub fn aggregate_markdown(
    base: &AggregateResult,
    new: &AggregateResult,
    names: (&str, &str),
) -> Result<String, CompareError> {
    if base.test != new.test {
        return Err(CompareError::DifferentTests {
            base: format!("{} aggregate", base.test.name()),
            new: format!("{} aggregate", new.test.name()),
        });
    }
    let servers = |a: &AggregateResult| {
        let names: Vec<&str> = a.hosts.iter().map(|h| h.name.as_str()).collect();
        format!("{} ({})", a.hosts.len(), names.join(", "))
    };
    let window = |a: &AggregateResult| format!("{} ({:.1} s)", a.window.start, a.window.seconds);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# jetproof aggregate {} test: comparison\n",
        base.test.name()
    );
    let _ = writeln!(out, "## Runs\n");
    let _ = writeln!(out, "| | BASE | NEW |\n| --- | --- | --- |");
    let _ = writeln!(out, "| Results | {} | {} |", names.0, names.1);
    let _ = writeln!(out, "| Servers | {} | {} |", servers(base), servers(new));
    let _ = writeln!(
        out,
        "| Shared window | {} | {} |",
        window(base),
        window(new)
    );
    let _ = writeln!(
        out,
        "| Overall Test Result | {} | {} |",
        verdict_name(base.verdict),
        verdict_name(new.verdict)
    );
    out.push('\n');
    let _ = writeln!(out, "## Whole solution\n");
    let _ = writeln!(
        out,
        "Every server together: achieved IOPS summed, each class's figures from the aggregate's \
         totals (the histograms of every instance of every server merged exactly). An aggregate \
         has no samples.csv, so no change is judged against noise.\n"
    );
    let _ = writeln!(out, "{FIGURES_HEADER}");
    if let (Some(b), Some(n)) = (base.achieved_iops, new.achieved_iops) {
        row(
            &mut out,
            "Achieved Transactional I/O per Second",
            b,
            n,
            3,
            None,
        );
    }
    let totals = |a: &AggregateResult| -> BTreeMap<String, Class> {
        a.totals
            .iter()
            .map(|(k, c)| {
                (
                    k.clone(),
                    Class {
                        count: c.count,
                        ops_per_sec: c.ops_per_sec,
                        avg_ms: c.avg_latency_ms,
                        p99_ms: c.p99_ms,
                    },
                )
            })
            .collect()
    };
    let no_noise = BTreeMap::new();
    class_rows(&mut out, &totals(base), &totals(new), &no_noise);
    // The test's own figures, summed over the servers where a sum means something.
    let solution = |a: &AggregateResult| -> Vec<Figure> {
        let mut sums: Vec<Figure> = Vec::new();
        for host in &a.hosts {
            for f in test_figures(&host.totals)
                .into_iter()
                .filter(|f| f.additive)
            {
                match sums.iter_mut().find(|s| s.name == f.name) {
                    Some(s) => s.value += f.value,
                    None => sums.push(f),
                }
            }
        }
        sums
    };
    figure_rows(&mut out, &solution(base), &solution(new), " (all servers)");
    out.push('\n');
    let _ = writeln!(out, "## Per server\n");
    let _ = writeln!(
        out,
        "Each server both aggregates have, by name: its achieved IOPS and its classes over its \
         instances (I/O-weighted average; p99 the highest instance's, the histograms being in the \
         server's own result.json).\n"
    );
    for b in &base.hosts {
        let Some(n) = new.hosts.iter().find(|n| n.name == b.name) else {
            continue;
        };
        let _ = writeln!(out, "### {}\n", b.name);
        let _ = writeln!(
            out,
            "Overall Test Result: BASE {}, NEW {}.\n",
            verdict_name(b.verdict),
            verdict_name(n.verdict)
        );
        let _ = writeln!(out, "{FIGURES_HEADER}");
        if let (Some(bi), Some(ni)) = (b.achieved_iops, n.achieved_iops) {
            row(
                &mut out,
                "Achieved Transactional I/O per Second",
                bi,
                ni,
                3,
                None,
            );
        }
        class_rows(
            &mut out,
            &classes_of(b.instances.iter().map(|i| &i.io)),
            &classes_of(n.instances.iter().map(|i| &i.io)),
            &no_noise,
        );
        figure_rows(
            &mut out,
            &test_figures(&b.totals),
            &test_figures(&n.totals),
            "",
        );
        out.push('\n');
    }
    let only = |a: &AggregateResult, other: &AggregateResult| -> Vec<String> {
        a.hosts
            .iter()
            .filter(|h| !other.hosts.iter().any(|o| o.name == h.name))
            .map(|h| h.name.clone())
            .collect()
    };
    for (which, names) in [("BASE", only(base, new)), ("NEW", only(new, base))] {
        if !names.is_empty() {
            let _ = writeln!(out, "Only in {which}: {}.\n", names.join(", "));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestKind;

    fn result(test: TestKind, iops: f64) -> TestResult {
        let mut r = TestResult::new(
            test,
            "2026-11-26T00:00:00Z".into(),
            10.0,
            crate::Parameters::default(),
        );
        r.achieved_iops = Some(iops);
        r
    }

    #[test]
    fn refuses_different_tests() {
        let e = markdown(
            &result(TestKind::Performance, 1.0),
            &result(TestKind::Backup, 1.0),
            None,
            ("a", "b"),
        )
        .expect_err("refused");
        assert!(
            e.to_string().contains("backup") && e.to_string().contains("performance"),
            "{e}"
        );
    }

    /// A server's section of an aggregates' comparison, up to the next one.
    fn section<'a>(md: &'a str, server: &str) -> &'a str {
        let start = md
            .find(&format!("### {server}\n"))
            .unwrap_or_else(|| panic!("no section of {server}: {md}"));
        let rest = &md[start + 4..];
        rest.find("### ").map_or(rest, |end| &rest[..end])
    }

    fn aggregate(name: &str) -> AggregateResult {
        let text = match name {
            "performance" => include_str!("../tests/fixtures/aggregate-performance.json"),
            "stress" => include_str!("../tests/fixtures/aggregate-stress.json"),
            "soft-recovery" => include_str!("../tests/fixtures/aggregate-soft-recovery.json"),
            _ => include_str!("../tests/fixtures/aggregate-backup.json"),
        };
        serde_json::from_str(text).expect("an aggregate")
    }

    #[test]
    fn two_aggregates_whole_solution_and_per_server() {
        let base = aggregate("performance");
        let mut new = base.clone();
        new.achieved_iops = base.achieved_iops.map(|i| i * 1.5);
        new.hosts[0].achieved_iops = base.hosts[0].achieved_iops.map(|i| i * 2.0);
        if let Some(c) = new.totals.get_mut("db_read") {
            c.avg_latency_ms *= 3.0;
        }
        new.hosts[1].name = "vm3".into();
        let md = aggregate_markdown(&base, &new, ("a", "b")).expect("same test");
        let iops = base.achieved_iops.expect("iops");
        assert!(
            md.contains(&format!(
                "| Achieved Transactional I/O per Second | {iops:.3} | {:.3} | +50.0% | - |",
                iops * 1.5
            )),
            "{md}"
        );
        let read = &base.totals["db_read"];
        assert!(
            md.contains(&format!(
                "| db_read average latency (msec) | {:.3} | {:.3} | +200.0% | - |",
                read.avg_latency_ms,
                read.avg_latency_ms * 3.0
            )),
            "{md}"
        );
        assert!(
            md.contains(&format!(
                "| db_read I/Os | {0} | {0} | +0.0% | - |",
                read.count
            )),
            "{md}"
        );
        // vm in both: its own IOPS and its instances' classes; vm2 and vm3 in one each.
        let vm = section(&md, "vm");
        let host_iops = base.hosts[0].achieved_iops.expect("vm's iops");
        assert!(
            vm.contains(&format!(
                "| Achieved Transactional I/O per Second | {host_iops:.3} | {:.3} | +100.0% | - |",
                host_iops * 2.0
            )),
            "{md}"
        );
        let vm_reads: u64 = base.hosts[0]
            .instances
            .iter()
            .map(|i| i.io["db_read"].count)
            .sum();
        assert!(
            vm.contains(&format!("| db_read I/Os | {vm_reads} | {vm_reads} |")),
            "{md}"
        );
        assert!(!md.contains("### vm2") && !md.contains("### vm3"), "{md}");
        assert!(
            md.contains("Only in BASE: vm2.") && md.contains("Only in NEW: vm3."),
            "{md}"
        );
        assert!(
            md.contains("| Servers | 2 (vm, vm2) | 2 (vm, vm3) |"),
            "{md}"
        );

        let e = aggregate_markdown(&base, &aggregate("backup"), ("a", "b")).expect_err("refused");
        assert!(
            e.to_string().contains("backup aggregate")
                && e.to_string().contains("performance aggregate"),
            "{e}"
        );
    }

    /// The test's own figures: per server from its typed totals, summed over the servers where
    /// a sum means something (logs, pages; not seconds).
    #[test]
    fn two_aggregates_compare_their_tests_own_figures() {
        let base = aggregate("soft-recovery");
        let mut new = base.clone();
        if let Totals::Recovery(r) = &mut new.hosts[1].totals {
            r.logs_replayed = 26;
        }
        let md = aggregate_markdown(&base, &new, ("a", "b")).expect("same test");
        // vm replayed 10 and vm2 13 logs in both fixtures' hosts.
        assert!(
            md.contains("| Logs replayed (all servers) | 23 | 36 | +56.5% | - |"),
            "{md}"
        );
        let vm2 = section(&md, "vm2");
        assert!(
            vm2.contains("| Logs replayed | 13 | 26 | +100.0% | - |"),
            "{md}"
        );
        assert!(vm2.contains("| Recovery seconds | 0.620 | 0.620 |"), "{md}");
        assert!(!md.contains("Recovery seconds (all servers)"), "{md}");

        let base = aggregate("stress");
        let mut new = base.clone();
        if let Totals::Workload(w) = &mut new.hosts[0].totals
            && let Some(c) = &mut w.checksum
        {
            c.pages_bad = 5;
        }
        let md = aggregate_markdown(&base, &new, ("a", "b")).expect("same test");
        // vm: 0 bad pages, vm2: 3 (the fixture's `vm2` has its integers + 3).
        assert!(
            md.contains("| Checksum bad pages (all servers) | 3 | 8 | +166.7% | - |"),
            "{md}"
        );
        let vm = section(&md, "vm");
        assert!(
            vm.contains("| Checksum bad pages | 0 | 5 | - | - |"),
            "{md}"
        );
    }

    #[test]
    fn change_and_noise() {
        // Base intervals: 90, 110, 100, 100 → relative sd about 8.2%.
        let mut csv = String::from(
            "elapsed_s,instance,class,count,ops_per_sec,avg_latency_ms,p99_latency_ms\n",
        );
        for (t, ops) in [(1, 90.0), (2, 110.0), (3, 100.0), (4, 100.0)] {
            let _ = writeln!(csv, "{t},db1,db_read,10,{ops},1.0,2.0");
        }
        let md = markdown(
            &result(TestKind::Performance, 100.0),
            &result(TestKind::Performance, 110.0),
            Some(&csv),
            ("a", "b"),
        )
        .expect("same test");
        assert!(md.contains("| Achieved Transactional I/O per Second | 100.000 | 110.000 | +10.0% | inside the noise (base intervals vary ±8.2%) |"), "{md}");
        let md = markdown(
            &result(TestKind::Performance, 100.0),
            &result(TestKind::Performance, 150.0),
            Some(&csv),
            ("a", "b"),
        )
        .expect("same test");
        assert!(md.contains("+50.0% | beyond the noise (±8.2%)"), "{md}");
    }
}

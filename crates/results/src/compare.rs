//! `jetproof compare BASE NEW`: two results of the same test side by side (`docs/report.md`,
//! "compare"): each figure of both, the change in percent, and whether the change is inside the
//! base run's own interval-to-interval noise (from its `samples.csv`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::html::{SampleRow, parse_samples};
use crate::{TestResult, Verdict};

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
    let mut sums: BTreeMap<String, (Class, f64, Option<jetproof_io::hist::LatencyHistogram>)> =
        BTreeMap::new();
    for instance in &result.instances {
        for (key, c) in &instance.io {
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
    let (b, n) = (classes(base), classes(new));
    for (key, bc) in &b {
        let Some(nc) = n.get(key) else { continue };
        let class_noise = latency_series.get(key).and_then(|v| noise(v));
        row(
            &mut out,
            &format!("{key} I/Os"),
            bc.count as f64,
            nc.count as f64,
            0,
            None,
        );
        row(
            &mut out,
            &format!("{key} I/O per second"),
            bc.ops_per_sec,
            nc.ops_per_sec,
            3,
            None,
        );
        row(
            &mut out,
            &format!("{key} average latency (msec)"),
            bc.avg_ms,
            nc.avg_ms,
            3,
            class_noise,
        );
        row(
            &mut out,
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
    out.push('\n');
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

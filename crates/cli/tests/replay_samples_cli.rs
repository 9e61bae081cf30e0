//! The replay's rate over time (issue 17, "for recovery the replay rate over time") through the
//! real binary: a soft recovery without a live view (`--quiet`) still samples each instance's
//! replay into `replay_samples` of `result.json`, the samples add up to the replay's own I/O
//! classes, and `report.html` draws them (one line per instance, with its points).

mod common;
use common::{jetproof, small_job};

#[test]
fn a_soft_recovery_keeps_its_replay_rate_per_interval_and_the_report_draws_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The shortest sample interval a job may ask for, so a replay of a few logs spans several.
    let job = small_job(
        dir.path(),
        "60s",
        "[log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n",
    );
    let text = std::fs::read_to_string(&job)
        .expect("job")
        .replace("sample_interval = \"500ms\"", "sample_interval = \"100ms\"");
    std::fs::write(&job, text).expect("job");
    jetproof(dir.path())
        .args([
            "run",
            "--quiet",
            "--test",
            "soft-recovery",
            "--log-files",
            "8",
        ])
        .args(["--out", "soft"])
        .arg(&job)
        .assert()
        .success();

    let result = common::result(&dir.path().join("soft/result.json"));
    let instances = result["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2, "{result}");
    for instance in instances {
        let name = instance["name"].as_str().expect("name");
        let samples = instance["replay_samples"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no replay_samples in {instance}"));
        assert!(!samples.is_empty(), "{name}");
        let figure = |s: &serde_json::Value, key: &str| {
            s[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: {key} in {s}"))
        };
        let mut previous = 0.0;
        let (mut log_bytes, mut reads, mut writes) = (0.0, 0.0, 0.0);
        for s in samples {
            let (elapsed, interval) = (figure(s, "elapsed_s"), figure(s, "interval_s"));
            assert!(interval > 0.0 && elapsed > previous, "{name}: {s}");
            // Each interval starts where the one before ended.
            assert!(
                (elapsed - interval - previous).abs() < 1e-6,
                "{name}: {s} after {previous}"
            );
            previous = elapsed;
            log_bytes += figure(s, "log_read_mb_per_sec") * interval * 1e6;
            reads += figure(s, "db_reads_per_sec") * interval;
            writes += figure(s, "db_writes_per_sec") * interval;
        }
        assert!(
            samples
                .iter()
                .any(|s| figure(s, "log_read_mb_per_sec") > 0.0),
            "{name}: no log read in {samples:?}"
        );
        // The intervals hold every I/O of the replay, no more: they add up to its classes.
        let class = |key: &str, field: &str| instance[key][field].as_f64().unwrap_or(0.0);
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.max(1.0);
        assert!(
            near(log_bytes, class("log_read", "bytes")),
            "{name}: {log_bytes} log bytes over the intervals, {} read",
            class("log_read", "bytes")
        );
        assert!(near(reads, class("db_read", "count")), "{name}: {reads}");
        assert!(near(writes, class("db_write", "count")), "{name}: {writes}");
        // The replay ends within its last interval.
        let seconds = instance["seconds"].as_f64().expect("seconds");
        assert!(previous >= seconds, "{name}: {previous} < {seconds}");
    }

    let html = std::fs::read_to_string(dir.path().join("soft/report.html")).expect("report.html");
    let chart = html
        .split("data-chart=\"replay-log-read\"")
        .nth(1)
        .and_then(|c| c.split("</svg>").next())
        .expect("the Replay Over Time chart");
    for instance in instances {
        let name = instance["name"].as_str().expect("name");
        let count = instance["replay_samples"].as_array().map_or(0, Vec::len);
        assert!(
            chart.contains(&format!("data-series=\"{name}\" data-points=\"{count}\"")),
            "{name}: {count} points in {chart}"
        );
    }
}

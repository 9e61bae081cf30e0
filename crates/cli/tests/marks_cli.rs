//! `jetproof mark` and excursions through the real binary (issue 37): a mark recorded while a
//! performance test runs reaches samples.csv, the test log, result.json and the report's charts;
//! a mark without a running test is refused (exit 2) and writes nothing; with a threshold no
//! device meets every interval is one excursion, which `thresholds.max_excursion` fails naming
//! it, and a bound as long as the window passes. (The excursions' timing against a latency
//! switched on and off at known times is `jetproof-procedures`'
//! `a_latency_spike_within_max_excursion_passes_and_beyond_it_fails`: only the in-memory fault
//! backend can slow the storage at a chosen moment.)

use std::time::{Duration, Instant};

mod common;
use common::{jetproof, result, small_job, spawn_jetproof};

#[test]
fn a_mark_during_a_run_reaches_every_output_and_a_mark_without_a_run_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Before any test: no marks.jsonl, exit 2, nothing created.
    std::fs::create_dir(dir.path().join("r")).expect("mkdir");
    jetproof(dir.path())
        .args(["mark", "r", "too early"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "no workload test is measuring there",
        ));
    assert!(!dir.path().join("r/marks.jsonl").exists());
    std::fs::remove_dir(dir.path().join("r")).expect("rmdir");
    let job = small_job(dir.path(), "4s", "");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    let mut child = spawn_jetproof(
        dir.path(),
        &["run", job, "--test", "performance", "--out", "r"],
        false,
    );
    let marks = dir.path().join("r/marks.jsonl");
    let started = Instant::now();
    while !marks.exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "no window");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1200));
    jetproof(dir.path())
        .args(["mark", "r", "controller A pulled, path 2"])
        .assert()
        .success()
        .stdout(predicates::str::contains("controller A pulled, path 2"));
    jetproof(dir.path())
        .args(["mark", "r", "two\nlines"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("LABEL"));
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    let json = result(&dir.path().join("r/result.json"));
    let recorded = json.pointer("/totals/marks").expect("marks in result.json");
    assert_eq!(recorded.as_array().map(Vec::len), Some(1), "{recorded}");
    assert_eq!(recorded[0]["label"], "controller A pulled, path 2");
    let elapsed = recorded[0]["elapsed_s"].as_f64().expect("elapsed_s");
    assert!((1.0..3.5).contains(&elapsed), "mark at {elapsed} s");
    assert!(recorded[0]["at"].as_str().is_some_and(|a| a.ends_with('Z')));
    let samples = std::fs::read_to_string(dir.path().join("r/samples.csv")).expect("samples");
    assert!(samples.lines().next().expect("header").ends_with(",mark"));
    // The comma would split the cell: samples.csv has it as a semicolon.
    assert_eq!(
        samples
            .lines()
            .filter(|l| l.ends_with(",controller A pulled; path 2"))
            .count(),
        1,
        "{samples}"
    );
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("log");
    assert!(log.contains(": controller A pulled, path 2"), "{log}");
    let html = std::fs::read_to_string(dir.path().join("r/report.html")).expect("html");
    assert!(
        html.contains(r#"class="mark" data-mark="controller A pulled, path 2""#),
        "no mark line in the charts"
    );
    let md = std::fs::read_to_string(dir.path().join("r/report.md")).expect("md");
    assert!(md.contains("controller A pulled, path 2"), "{md}");
    // After the test: refused, the file left as it was.
    let before = std::fs::read(&marks).expect("marks");
    jetproof(dir.path())
        .args(["mark", "r", "late"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("has finished"));
    assert_eq!(std::fs::read(&marks).expect("marks"), before);
}

#[test]
fn max_excursion_fails_an_excursion_beyond_it_naming_it_and_a_count_needs_the_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No device reads in under a nanosecond: every interval is above, one excursion per
    // instance as long as the window (2 s), still above at its end.
    let strict = "[thresholds]\ndb_read_avg_ms = 0.000001\nlog_write_avg_ms = 1000\n\
                  db_read_max_ms = 10000\nlog_write_max_ms = 10000\n\
                  page_fault_stalls_per_sec = 1000000\nmax_excursion = \"1s\"\n";
    let job = small_job(dir.path(), "2s", strict);
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "i"])
        .assert()
        .success();
    jetproof(dir.path())
        .args(["run", job, "--test", "performance", "--out", "r"])
        .assert()
        .code(1);
    let json = result(&dir.path().join("r/result.json"));
    let excursions = json["totals"]["excursions"].as_array().expect("excursions");
    let reads: Vec<_> = excursions
        .iter()
        .filter(|e| e["class"] == "db_read")
        .collect();
    assert_eq!(reads.len(), 2, "one per database: {excursions:?}");
    for e in &reads {
        assert_eq!(e["start_s"].as_f64(), Some(0.0), "{e}");
        assert!(e["duration_s"].as_f64().expect("duration") >= 1.9, "{e}");
        assert_eq!(e["recovered"], false);
    }
    let reasons = json["reasons"].as_array().expect("reasons");
    assert!(
        reasons.iter().any(|r| r
            .as_str()
            .is_some_and(|r| r.contains("excursion did not return within bounds")
                && r.contains("db1 db_read above 0.000001 ms"))),
        "{reasons:?}"
    );
    let md = std::fs::read_to_string(dir.path().join("r/report.md")).expect("md");
    assert!(md.contains("Excursions"), "{md}");
    // The job check refuses a count without the bound, before any I/O.
    let counted = dir.path().join("counted.toml");
    std::fs::write(
        &counted,
        std::fs::read_to_string(job)
            .expect("job")
            .replace("max_excursion = \"1s\"", "max_excursions = 2"),
    )
    .expect("write");
    jetproof(dir.path())
        .args([
            "run",
            counted.to_str().expect("utf-8"),
            "--test",
            "performance",
        ])
        .args(["--out", "r2"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("thresholds.max_excursions"));
    assert!(!dir.path().join("r2").exists());
}

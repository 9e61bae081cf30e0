//! `jetproof sweep` through the real binary (issue 19): a 4-point sweep on small databases whose
//! `sweep.json` points match their own `result.json` files, and whose `sweep.html` renders in
//! headless Chromium; a sweep interrupted by SIGINT keeps its finished points and resumes;
//! `--set` series; `--compare` of two sweeps; bad `--threads` and `--set` refused (exit 2)
//! before any I/O, and so is a sweep of databases that do not exist.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{chromium_or_skip, interrupt, jetproof, result, small_job, spawn_jetproof};

fn sweep_json(dir: &Path) -> serde_json::Value {
    result(&dir.join("sweep.json"))
}

fn init(dir: &Path, job: &Path) {
    jetproof(dir)
        .arg("init")
        .arg(job)
        .args(["--out", "init"])
        .assert()
        .success();
}

/// Every point of `sweep.json` against its own `result.json`: threads, IOPS, verdict, reasons,
/// and each class's average (count-weighted over the instances) and p99 (between the
/// instances' own).
fn points_match_their_results(sweep_dir: &Path, doc: &serde_json::Value) {
    for point in doc["points"].as_array().expect("points") {
        let dir = sweep_dir.join(point["dir"].as_str().expect("dir"));
        let r = common::valid_result(&dir.join("result.json"), "performance");
        let json = result(&dir.join("result.json"));
        let context = format!("{point}");
        assert_eq!(
            point["threads"].as_u64(),
            json["parameters"]["sessions_per_instance"].as_u64(),
            "{context}"
        );
        assert_eq!(
            point["achieved_iops"].as_f64(),
            r.achieved_iops,
            "{context}"
        );
        assert_eq!(
            point["verdict"].as_str(),
            Some(if r.reasons.is_empty() { "pass" } else { "fail" })
        );
        assert_eq!(point["reasons"], json["reasons"], "{context}");
        for class in ["db_read", "db_write", "log_write"] {
            let (mut count, mut sum, mut p99s) = (0u64, 0.0, Vec::new());
            for instance in json["instances"].as_array().expect("instances") {
                let c = &instance[class];
                let n = c["count"].as_u64().expect("count");
                count += n;
                sum += c["avg_latency_ms"].as_f64().expect("avg") * n as f64;
                p99s.push(c["p99_ms"].as_f64().expect("p99"));
            }
            let figures = &point["classes"][class];
            assert_eq!(figures["count"].as_u64(), Some(count), "{class}: {context}");
            let avg = figures["avg_ms"].as_f64().expect("avg_ms");
            assert!(
                (avg - sum / count as f64).abs() <= 1e-6 * avg.max(1e-3),
                "{class} average {avg} vs {}: {context}",
                sum / count as f64
            );
            let p99 = figures["p99_ms"].as_f64().expect("p99_ms");
            let (lo, hi) = p99s
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
            assert!(
                p99 >= lo * 0.99 - 1e-9 && p99 <= hi * 1.01 + 1e-9,
                "{class} p99 {p99} outside the instances' {p99s:?}: {context}"
            );
        }
    }
}

#[test]
fn a_four_point_sweep_runs_end_to_end_and_renders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    init(dir.path(), &job);
    let output = jetproof(dir.path())
        .arg("sweep")
        .arg(&job)
        .args([
            "--threads",
            "1,2,3,4",
            "--duration",
            "2s",
            "--quiet",
            "--out",
        ])
        // Absolute: result.json names its test log by the path the run was given.
        .arg(dir.path().join("sw"))
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sweep_dir = dir.path().join("sw");
    let doc = sweep_json(&sweep_dir);
    assert_eq!(doc["sweep_version"], 1);
    assert_eq!(doc["state"], "complete");
    let points = doc["points"].as_array().expect("points");
    let threads: Vec<u64> = points
        .iter()
        .filter_map(|p| p["threads"].as_u64())
        .collect();
    assert_eq!(threads, [1, 2, 3, 4]);
    for p in points {
        assert!(p["achieved_iops"].as_f64().expect("iops") > 0.0, "{p}");
        // Each point is a whole performance run: report.md and report.html beside result.json.
        let point_dir = sweep_dir.join(p["dir"].as_str().expect("dir"));
        for file in [
            "result.json",
            "report.md",
            "report.html",
            "test.log",
            "samples.csv",
        ] {
            assert!(
                point_dir.join(file).is_file(),
                "{}",
                point_dir.join(file).display()
            );
        }
        // Its own warm-up: the test log of every point says it warmed up.
        let log = std::fs::read_to_string(point_dir.join("test.log")).expect("test log");
        assert!(log.contains("Sweep point:"), "{log}");
    }
    points_match_their_results(&sweep_dir, &doc);
    let md = std::fs::read_to_string(sweep_dir.join("sweep.md")).expect("sweep.md");
    assert!(md.contains("| threads | 4 |"), "{md}");
    let html = std::fs::read_to_string(sweep_dir.join("sweep.html")).expect("sweep.html");
    for chart in ["sweep-iops", "sweep-db-read", "sweep-log-write"] {
        assert!(html.contains(&format!("data-chart=\"{chart}\"")), "{chart}");
    }
    assert!(html.contains("default-src 'none'"), "the reports' CSP");
    assert!(html.contains("class=\"threshold\""), "thresholds drawn");
    renders_in_chromium(&sweep_dir.join("sweep.html"), dir.path());

    // Compared with itself through `jetproof compare`: every point, 0% apart, one chart each.
    let compared = jetproof(dir.path())
        .args(["compare", "sw", "sw", "--out", "cmp"])
        .output()
        .expect("compare");
    assert!(
        compared.status.success(),
        "{}",
        String::from_utf8_lossy(&compared.stderr)
    );
    let cmp = std::fs::read_to_string(dir.path().join("cmp/sweep-compare.md")).expect("md");
    // Three changes per point (IOPS, database read, log write), every one nil.
    assert_eq!(cmp.matches("| +0.0% |").count(), 12, "{cmp}");
    let cmp_html =
        std::fs::read_to_string(dir.path().join("cmp/sweep-compare.html")).expect("html");
    // A curve of each sweep in the IOPS chart; in the two latency charts their average and p99.
    for (series, count) in [("sw", 2), ("sw avg", 4)] {
        let attribute = format!("data-series=\"{series}\"");
        assert_eq!(cmp_html.matches(&attribute).count(), count, "{series}");
    }
    assert_eq!(
        cmp_html.matches("data-series=\"sw p99\"").count(),
        4,
        "{cmp_html}"
    );

    // A link at one of the comparison's names is never written through: exit 2, the file it
    // points to untouched.
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, "not jetproof's").expect("target");
    std::fs::create_dir(dir.path().join("cmp-link")).expect("mkdir");
    std::os::unix::fs::symlink(&target, dir.path().join("cmp-link/sweep-compare.md"))
        .expect("symlink");
    let refused = jetproof(dir.path())
        .args(["compare", "sw", "sw", "--out", "cmp-link"])
        .output()
        .expect("compare");
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("target"),
        "not jetproof's"
    );
    assert!(!dir.path().join("cmp-link/sweep-compare.html").exists());
}

/// Headless Chromium takes a screenshot (not blank: many colours) and dumps the DOM, in which
/// each of the three charts drew every point it says it has; like `report_chromium.rs`.
fn renders_in_chromium(page: &Path, scratch: &Path) {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let browse = |what: &[&str]| {
        let output = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--window-size=1000,1200",
            ])
            .arg(format!(
                "--user-data-dir={}",
                scratch.join("profile").display()
            ))
            .args(what)
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("run chromium");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    let shot = scratch.join("sweep.png");
    browse(&[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // A blank page compresses to almost nothing; three charts and tables do not.
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
    let dom = String::from_utf8_lossy(&browse(&["--dump-dom"]).stdout).into_owned();
    let mut charts = 0;
    for chart in dom.split("<svg").skip(1) {
        let chart = chart.split("</svg>").next().unwrap_or("");
        if !chart.contains("class=\"chart\"") {
            continue;
        }
        charts += 1;
        let mut markers = 0;
        for tag in chart.split("<polyline").skip(1) {
            let tag = tag.split('>').next().unwrap_or("");
            let attr = |name: &str| {
                let key = format!(" {name}=\"");
                tag.find(&key)
                    .map(|at| tag[at + key.len()..].split('"').next().unwrap_or(""))
            };
            let said: usize = attr("data-points")
                .and_then(|n| n.parse().ok())
                .expect("count");
            let drawn = attr("points").expect("points").split_whitespace().count();
            assert_eq!(said, drawn, "{tag}");
            assert_eq!(said, 4, "every point of the sweep drawn: {tag}");
            markers += said;
        }
        assert_eq!(
            chart.matches("class=\"marker\"").count(),
            markers,
            "a dot per point"
        );
    }
    assert_eq!(charts, 3, "three charts in the rendered page");
    // Every point has its dot: 4 in the IOPS chart, 4 per curve (average, p99) in the others.
    assert_eq!(
        dom.matches("class=\"marker\"").count(),
        4 + 8 + 8,
        "markers"
    );
    assert!(!dom.contains("src=\"http"), "no request");
}

#[test]
fn an_interrupted_sweep_keeps_its_points_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    init(dir.path(), &job);
    let job_arg = job.to_str().expect("utf-8");
    let out = dir.path().join("sw");
    let out_arg = out.to_str().expect("utf-8");
    let args = [
        "sweep",
        job_arg,
        "--threads",
        "1,2,3",
        "--out",
        out_arg,
        "--quiet",
    ];
    let child = spawn_jetproof(dir.path(), &args, true);
    // Wait until the first point is written, then interrupt the second.
    let doc_path = dir.path().join("sw/sweep.json");
    let waited = std::time::Instant::now();
    while !doc_path.exists() {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "no first point"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(800));
    let (status, stdout, stderr) = interrupt(child);
    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("run the same command to resume"),
        "{stderr}"
    );
    let first = sweep_json(&dir.path().join("sw"));
    assert_eq!(first["state"], "interrupted", "{first}");
    let kept: Vec<u64> = first["points"]
        .as_array()
        .expect("points")
        .iter()
        .filter(|p| p["interrupted"] == false)
        .filter_map(|p| p["threads"].as_u64())
        .collect();
    assert!(kept.contains(&1), "{first}");
    let output = jetproof(dir.path()).args(args).output().expect("resume");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("resuming the sweep"), "{stderr}");
    assert!(
        stdout.contains("finished before, kept (resumed"),
        "{stdout}"
    );
    let doc = sweep_json(&dir.path().join("sw"));
    assert_eq!(doc["state"], "complete");
    let points = doc["points"].as_array().expect("points");
    assert_eq!(points.len(), 3, "{doc}");
    for p in points {
        let threads = p["threads"].as_u64().expect("threads");
        // The finished points were kept, not run again: their result.json is the first run's.
        assert_eq!(p["resumed"], kept.contains(&threads), "{p}");
        assert_eq!(p["interrupted"], false, "{p}");
    }
    points_match_their_results(&dir.path().join("sw"), &doc);
    // Another sweep into the same folder is refused.
    jetproof(dir.path())
        .args(["sweep", job_arg, "--threads", "1,2", "--out", "sw"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("holds a sweep of another job"));
}

#[test]
fn settings_sweep_one_series_per_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "1s", "");
    init(dir.path(), &job);
    let output = jetproof(dir.path())
        .arg("sweep")
        .arg(&job)
        .args([
            "--threads",
            "1,2",
            "--set",
            "workload.lazy_commit_percent=0,100",
            "--out",
            "sw",
            "--quiet",
        ])
        .output()
        .expect("run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = sweep_json(&dir.path().join("sw"));
    let points = doc["points"].as_array().expect("points");
    assert_eq!(points.len(), 4);
    for p in points {
        let dir = dir.path().join("sw").join(p["dir"].as_str().expect("dir"));
        let r = result(&dir.join("result.json"));
        assert_eq!(
            r["parameters"]["workload"]["lazy_commit_percent"].to_string(),
            p["settings"]["workload.lazy_commit_percent"]
                .as_str()
                .expect("setting"),
            "{p}"
        );
    }
    let html = std::fs::read_to_string(dir.path().join("sw/sweep.html")).expect("html");
    assert!(html.contains("data-series=\"lazy_commit_percent=100\""));
}

#[test]
fn bad_threads_and_settings_are_refused_before_any_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "1s", "");
    // No databases: bad --threads and --set are refused first, naming the flag or key.
    for (args, says) in [
        (vec!["--threads", "0,2"], "at least 1 thread"),
        (vec!["--threads", "8..2"], "ends below its start"),
        (vec!["--threads", "two"], "not a thread count"),
        (vec!["--threads", "1..2000"], "at most"),
        (
            vec!["--threads", "1,2", "--set", "workload.no_such=1"],
            "workload.no_such",
        ),
        (
            vec![
                "--threads",
                "1,2",
                "--set",
                "workload.lazy_commit_percent=50,lots",
            ],
            "workload.lazy_commit_percent",
        ),
        (
            vec!["--threads", "1,2", "--set", "storage.io_engine=std,floppy"],
            "storage.io_engine",
        ),
        (
            vec!["--threads", "1,2", "--set", "storage.db_size=1GiB"],
            "storage.db_size",
        ),
        (vec!["--threads", "1,2", "--set", "lazy=5"], "not a job key"),
        (vec![], "--threads"),
    ] {
        jetproof(dir.path())
            .arg("sweep")
            .arg(&job)
            .args(&args)
            .args(["--out", "sw"])
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
        assert!(!dir.path().join("sw").exists(), "{args:?}: nothing written");
        assert!(
            !dir.path().join("jetproof-data").exists(),
            "{args:?}: no database made"
        );
    }
    // Good flags, no databases: the run's refusal.
    jetproof(dir.path())
        .arg("sweep")
        .arg(&job)
        .args(["--threads", "1,2", "--out", "sw"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("run `jetproof init` first"));
    assert!(!dir.path().join("sw").exists());
}

//! `jetproof compare BASE NEW` through the real binary: two performance runs side by side, and
//! results of different tests refused (exit 2, nothing written); --out and report.html never
//! written over or through a file jetproof did not make.

mod common;

use common::{jetproof, small_job};

#[test]
fn two_performance_runs_side_by_side_and_different_tests_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "2s", "");
    jetproof(dir.path())
        .arg("init")
        .arg(&job)
        .assert()
        .success();
    for out in ["a", "b"] {
        jetproof(dir.path())
            .args(["run", "--test", "performance", "--quiet", "--out", out])
            .arg(&job)
            .assert()
            .success();
    }
    jetproof(dir.path())
        .args(["compare", "a", "b", "--out", "cmp"])
        .assert()
        .success();
    let md = std::fs::read_to_string(dir.path().join("cmp/compare.md")).expect("compare.md");
    let a = common::result(&dir.path().join("a/result.json"));
    let b = common::result(&dir.path().join("b/result.json"));
    let (x, y) = (
        a["achieved_iops"].as_f64().expect("a"),
        b["achieved_iops"].as_f64().expect("b"),
    );
    let expected = format!(
        "| Achieved Transactional I/O per Second | {x:.3} | {y:.3} | {:+.1}% |",
        (y - x) / x * 100.0
    );
    assert!(md.contains(&expected), "{expected}\n{md}");
    assert!(
        md.contains("the noise"),
        "a noise note from a's samples: {md}"
    );
    let html = std::fs::read_to_string(dir.path().join("cmp/compare.html")).expect("html");
    assert!(html.contains("default-src 'none'") && html.contains("<table>"));
    // BASE and NEW overlaid: every chart has both series (drawn in tests/report_chromium.rs).
    let charts = html.matches("<svg").count();
    assert!(
        html.contains("data-chart=\"compare-iops\"") && charts >= 3,
        "{charts} charts"
    );
    assert_eq!(html.matches("data-series=\"BASE\"").count(), charts);
    assert_eq!(html.matches("data-series=\"NEW\"").count(), charts);

    jetproof(dir.path())
        .args(["run", "--test", "backup", "--out", "bk"])
        .arg(&job)
        .assert()
        .success();
    let refused = jetproof(dir.path())
        .args(["compare", "a", "bk", "--out", "refused"])
        .output()
        .expect("compare");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("backup") && stderr.contains("performance"),
        "{stderr}"
    );
    assert!(!dir.path().join("refused").exists(), "nothing written");
}

/// `compare --out` and `report --out` write only where every results directory may be written
/// (new, or holding jetproof's results alone), and `report` never writes through a link at
/// `report.html`: each refusal is bad input (exit 2) and leaves the foreign file as it was.
#[test]
fn compare_and_report_never_write_over_or_through_what_jetproof_did_not_make() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), "1s", "");
    jetproof(dir.path())
        .args(["run", "--test", "performance", "--quiet", "--out", "a"])
        .arg(&job)
        .assert()
        .success();
    let foreign = dir.path().join("mine");
    std::fs::create_dir(&foreign).expect("dir");
    std::fs::write(foreign.join("notes.txt"), "precious").expect("notes");
    for args in [
        &["compare", "a", "a", "--out", "mine"][..],
        &["report", "a", "--out", "mine"][..],
    ] {
        let out = jetproof(dir.path()).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("notes.txt"),
            "{args:?}: the refusal names the foreign file"
        );
        let entries: Vec<_> = std::fs::read_dir(&foreign).expect("list").collect();
        assert_eq!(entries.len(), 1, "{args:?}: nothing written beside it");
        assert_eq!(
            std::fs::read_to_string(foreign.join("notes.txt")).expect("notes"),
            "precious"
        );
    }
    // --out a symbolic link to a directory: refused by every writer as links are (issue 34),
    // nothing written where it points.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("dir");
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("linked")).expect("link");
    for args in [
        &["report", "a", "--out", "linked"][..],
        &["compare", "a", "a", "--out", "linked"][..],
    ] {
        let out = jetproof(dir.path()).args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("is a symbolic link"), "{args:?}: {stderr}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).expect("list").count(),
            0,
            "{args:?}: nothing written through the link"
        );
    }
    // A link at report.html in the results directory itself: refused, its target untouched.
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, "keep").expect("precious");
    std::fs::remove_file(dir.path().join("a/report.html")).expect("remove");
    std::os::unix::fs::symlink(&precious, dir.path().join("a/report.html")).expect("link");
    jetproof(dir.path()).args(["report", "a"]).assert().code(2);
    assert_eq!(
        std::fs::read_to_string(&precious).expect("precious"),
        "keep"
    );
}

/// Two aggregates (`jetproof aggregate`'s results, as the binary wrote them: the fixtures of
/// `crates/results/tests/fixtures`): the whole solution and each server side by side, with the
/// whole solution's latency distributions overlaid; an aggregate against one server's result, or
/// aggregates of different tests, refused with exit 2 and nothing written.
#[test]
fn two_aggregates_side_by_side_and_an_aggregate_against_a_host_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/fixtures");
    let place = |name: &str, fixture: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures.join(fixture)).expect("fixture"),
        )
        .expect("JSON");
        edit(&mut value);
        std::fs::create_dir(dir.path().join(name)).expect("dir");
        std::fs::write(
            dir.path().join(name).join("result.json"),
            serde_json::to_string_pretty(&value).expect("JSON"),
        )
        .expect("write");
        value
    };
    let base = place("base", "aggregate-performance.json", &|_| {});
    let new = place("new", "aggregate-performance.json", &|v| {
        let doubled = v["achieved_iops"].as_f64().expect("iops") * 2.0;
        v["achieved_iops"] = doubled.into();
        let slower = v["hosts"][1]["achieved_iops"].as_f64().expect("iops") / 2.0;
        v["hosts"][1]["achieved_iops"] = slower.into();
    });
    place("backups", "aggregate-backup.json", &|_| {});
    place("host", "performance.json", &|_| {});

    let out = jetproof(dir.path())
        .args(["compare", "base", "new", "--out", "cmp"])
        .output()
        .expect("compare");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let md = std::fs::read_to_string(dir.path().join("cmp/compare.md")).expect("compare.md");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(md.as_str()),
        "compare.md is what was printed"
    );
    let iops = base["achieved_iops"].as_f64().expect("iops");
    assert_eq!(new["achieved_iops"].as_f64(), Some(iops * 2.0));
    assert!(
        md.contains(&format!(
            "| Achieved Transactional I/O per Second | {iops:.3} | {:.3} | +100.0% | - |",
            iops * 2.0
        )),
        "{md}"
    );
    let vm2 = md.split("### vm2\n").nth(1).expect("vm2's section");
    let host_iops = base["hosts"][1]["achieved_iops"].as_f64().expect("iops");
    assert!(
        vm2.contains(&format!(
            "| Achieved Transactional I/O per Second | {host_iops:.3} | {:.3} | -50.0% | - |",
            host_iops / 2.0
        )),
        "{md}"
    );
    let read = &base["totals"]["db_read"];
    assert!(
        md.contains(&format!(
            "| db_read p99 latency (msec) | {0:.3} | {0:.3} | +0.0% | - |",
            read["p99_ms"].as_f64().expect("p99")
        )),
        "{md}"
    );
    let html = std::fs::read_to_string(dir.path().join("cmp/compare.html")).expect("html");
    assert!(html.contains("default-src 'none'") && html.contains("<table>"));
    let charts = html.matches("<svg").count();
    assert!(
        html.contains("data-chart=\"compare-distribution-db_read\"") && charts >= 3,
        "{charts} charts"
    );
    assert_eq!(html.matches("data-series=\"BASE\"").count(), charts);
    assert_eq!(html.matches("data-series=\"NEW\"").count(), charts);

    for (other, words) in [
        ("host", ["base is an aggregate", "host one server's result"]),
        ("backups", ["backup aggregate", "performance aggregate"]),
    ] {
        let out_dir = format!("refused-{other}");
        let refused = jetproof(dir.path())
            .args(["compare", "base", other, "--out", &out_dir])
            .output()
            .expect("compare");
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(words.iter().all(|w| stderr.contains(w)), "{stderr}");
        assert!(!dir.path().join(&out_dir).exists(), "nothing written");
    }
}

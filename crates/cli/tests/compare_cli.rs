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

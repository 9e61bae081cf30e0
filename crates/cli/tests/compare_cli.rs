//! `jetproof compare BASE NEW` through the real binary: two performance runs side by side, and
//! results of different tests refused (exit 2, nothing written).

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

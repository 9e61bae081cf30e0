//! Issue 5: each test type (performance, stress, backup, soft-recovery) runs through the real
//! binary on small databases and writes a `result.json` that fits the schema
//! (`common::valid_result`), with `report.md` and the test log beside it. The other tests check
//! each type's own figures; this one checks that none of them writes a result a report or an
//! aggregation could not read.

mod common;
use common::{jetproof, small_job, valid_result};

#[test]
fn every_test_type_writes_a_valid_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(
        dir.path(),
        "1s",
        "[log]\nfile_size = \"64KiB\"\nbuffer_size = \"64KiB\"\n",
    );
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "init"])
        .assert()
        .success();
    valid_result(&dir.path().join("init/result.json"), "init");
    for (test, extra, kind) in [
        ("performance", &[][..], "performance"),
        ("stress", &["--duration", "1s"][..], "stress"),
        ("backup", &[][..], "backup"),
        ("soft-recovery", &["--log-files", "2"][..], "recovery"),
    ] {
        let out = format!("r-{test}");
        jetproof(dir.path())
            .args(["run", job, "--test", test, "--out", &out])
            .args(extra)
            .assert()
            .success();
        let result = valid_result(&dir.path().join(&out).join("result.json"), kind);
        assert_eq!(result.instances.len(), 2, "{test}");
        assert!(
            result.instances.iter().all(|i| !i.io.is_empty()),
            "{test}: every instance measured its I/O"
        );
    }
    jetproof(dir.path())
        .args(["checksum", job, "--out", "sum"])
        .assert()
        .success();
    valid_result(&dir.path().join("sum/result.json"), "checksum");
}

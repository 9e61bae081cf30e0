//! Every kind of `result.json` reads back into the typed [`TestResult`] and serialises to the same
//! document, byte for byte: the typed sections (`jetproof_results::sections`) know every key
//! jetproof writes, with its number type.
//!
//! The fixtures in `tests/fixtures/` were written by the `jetproof` binary itself (schema version
//! 5, before the sections were typed): `init`, `run --test performance` (auto-tune, log
//! replication, one database), `run --test stress` (with its checksum pass), `checksum`,
//! `run --test backup` and `run --test soft-recovery`. The CLI tests check the same round trip on
//! every result they read (`crates/cli/tests/common`), damaged and failed runs included.
//!
//! The `aggregate-*.json` fixtures are `jetproof aggregate`'s result of two hosts (`vm`: the
//! fixture of that test; `vm2`: the same with its totals changed, so that the hosts' rows differ),
//! written by the binary before the aggregate's per-host totals were typed; `aggregate-*.md` and
//! `aggregate-*.html` are the `report.md` and `report.html` written beside each. Reading one back
//! and serialising it gives the same document, and its reports are made again from what was
//! read, byte for byte.

use std::path::Path;

use jetproof_results::aggregate::{self, AggregateResult};
use jetproof_results::{TestKind, TestResult};

fn round_trip(name: &str, kind: TestKind) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("fixture");
    let result: TestResult = serde_json::from_str(&text).expect("reads back");
    assert_eq!(result.test, kind);
    let again = serde_json::to_string_pretty(&result).expect("serialises") + "\n";
    if again != text {
        let first = text
            .lines()
            .zip(again.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "{name}: line {} differs:\n  written: {:?}\n  again:   {:?}",
            first + 1,
            text.lines().nth(first),
            again.lines().nth(first)
        );
    }
}

#[test]
fn init_result_round_trips() {
    round_trip("init", TestKind::Init);
}

#[test]
fn performance_result_round_trips() {
    round_trip("performance", TestKind::Performance);
}

#[test]
fn stress_result_round_trips() {
    round_trip("stress", TestKind::Stress);
}

#[test]
fn checksum_result_round_trips() {
    round_trip("checksum", TestKind::Checksum);
}

#[test]
fn backup_result_round_trips() {
    round_trip("backup", TestKind::Backup);
}

#[test]
fn soft_recovery_result_round_trips() {
    round_trip("soft-recovery", TestKind::Recovery);
}

/// The typed sections are what the readers use: spot checks that the fixtures' figures land in
/// them (a section that read nothing would still round-trip an empty object).
#[test]
fn the_sections_carry_the_figures() {
    let read = |name: &str| -> TestResult {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(format!("{name}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("reads")
    };
    let perf = read("performance");
    let totals = perf.totals.workload().expect("workload totals");
    assert!(totals.transactions > 0 && totals.measured_seconds > 0.0);
    let figures = perf.instances[0]
        .figures
        .workload()
        .expect("workload figures");
    assert!(figures.transactions > 0);
    assert!(figures.log_replication.is_some());
    assert!(perf.parameters.autotune.is_some());
    assert!(perf.parameters.limits.is_some());
    assert!(perf.parameters.job_table("workload").is_some());

    let stress = read("stress");
    assert!(stress.totals.checksum().expect("checksum pass").pages_seen > 0);
    assert!(stress.instances[0].figures.checksum().is_some());

    let checksum = read("checksum");
    let c = checksum.instances[0]
        .figures
        .checksum()
        .expect("checksum figures");
    assert!(c.file.pages_seen > 0 && c.file.instance.is_empty());
    assert!(c.log_files.present);

    let backup = read("backup");
    assert!(backup.totals.backup().expect("backup totals").bytes > 0);
    assert!(
        backup.instances[0]
            .figures
            .backup()
            .expect("backup")
            .backup
            .pages_seen
            > 0
    );

    let soft = read("soft-recovery");
    let r = soft.instances[0]
        .figures
        .recovery()
        .expect("recovery figures");
    assert!(r.logs_generated.is_some());
    assert!(r.replay.as_ref().expect("replayed").logs_replayed > 0);
    assert!(
        soft.totals
            .recovery()
            .expect("totals")
            .generation_seconds
            .is_some()
    );
    assert!(soft.parameters.soft_recovery.is_some());

    let init = read("init");
    assert!(init.totals.init().expect("init totals").bytes_written > 0);
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

fn first_difference(name: &str, written: &str, again: &str) {
    if again != written {
        let first = written
            .lines()
            .zip(again.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "{name}: line {} differs:\n  written: {:?}\n  again:   {:?}",
            first + 1,
            written.lines().nth(first),
            again.lines().nth(first)
        );
    }
}

fn aggregate_round_trip(name: &str, kind: TestKind) -> AggregateResult {
    let text = fixture(&format!("aggregate-{name}.json"));
    let result: AggregateResult = serde_json::from_str(&text).expect("reads back");
    assert_eq!(result.test, kind);
    assert_eq!(result.hosts.len(), 2);
    let again = serde_json::to_string_pretty(&result).expect("serialises") + "\n";
    first_difference(&format!("aggregate-{name}.json"), &text, &again);
    let report = fixture(&format!("aggregate-{name}.md"));
    first_difference(
        &format!("aggregate-{name}.md"),
        &report,
        &aggregate::markdown(&result),
    );
    // `jetproof report` reads an aggregate's text the same way (`html::report_from_json`).
    let html = jetproof_results::html::report_from_json(&text, None).expect("reads back");
    first_difference(
        &format!("aggregate-{name}.html"),
        &fixture(&format!("aggregate-{name}.html")),
        &html,
    );
    result
}

// Each also checks that the hosts' totals were read into their test's type (`vm2`'s integers
// are `vm`'s + 3).

#[test]
fn performance_aggregate_round_trips() {
    let a = aggregate_round_trip("performance", TestKind::Performance);
    let [vm, vm2] = [0, 1].map(|i| a.hosts[i].totals.workload().expect("workload totals"));
    assert_eq!(vm2.transactions, vm.transactions + 3);
}

#[test]
fn stress_aggregate_round_trips() {
    let a = aggregate_round_trip("stress", TestKind::Stress);
    let [vm, vm2] = [0, 1].map(|i| a.hosts[i].totals.checksum().expect("checksum pass"));
    assert!(vm.pages_seen > 0);
    assert_eq!(vm2.pages_bad, vm.pages_bad + 3);
}

#[test]
fn checksum_aggregate_round_trips() {
    let a = aggregate_round_trip("checksum", TestKind::Checksum);
    let [vm, vm2] = [0, 1].map(|i| a.hosts[i].totals.checksum().expect("checksum totals"));
    assert_eq!(vm2.pages_seen, vm.pages_seen + 3);
}

#[test]
fn backup_aggregate_round_trips() {
    let a = aggregate_round_trip("backup", TestKind::Backup);
    let [vm, vm2] = [0, 1].map(|i| a.hosts[i].totals.backup().expect("backup totals"));
    assert_eq!(vm2.bytes, vm.bytes + 3);
    // The server's figure is the sum of its databases' as printed (two decimals), so per
    // database × databases = per server on paper.
    let (per, server) = a.hosts[1].backup_mb_per_sec();
    assert_eq!(per.len(), 2);
    assert!(
        (per.iter().sum::<f64>() - server).abs() < 1e-9,
        "{per:?} {server}"
    );
    assert!(server > vm2.mb_per_sec, "{server} {}", vm2.mb_per_sec);
}

#[test]
fn soft_recovery_aggregate_round_trips() {
    let a = aggregate_round_trip("soft-recovery", TestKind::Recovery);
    let [vm, vm2] = [0, 1].map(|i| a.hosts[i].totals.recovery().expect("recovery totals"));
    assert_eq!((vm.logs_replayed, vm2.logs_replayed), (10, 13));
}

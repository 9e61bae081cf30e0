//! Issue 33 through the real binary: the databases `init` makes hold content of the job's
//! `workload.compression_ratio`, every database its own (no 8 KiB block of one equals a block of
//! another), a run's inserted and replaced records keep the setting, and `init` and `checksum`
//! measure and report it (`result.json` `data_reduction`, the reports' "Data Reduction"
//! section). A dedup ratio of 2.0 repeats about half of the blocks (attachments on long-value
//! pages); one the pages cannot hold is refused before any I/O.

mod common;

use std::path::{Path, PathBuf};

use common::{jetproof, valid_result};
use jetproof_results::reduction::{DataReduction, ReductionFigures};

/// Two 32 MiB databases of 32 KiB pages (Exchange's), buffered, with `workload` appended to the
/// `[workload]` table and a 3 s window for runs.
fn job(dir: &Path, workload: &str) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndatabases = 2\ndb_size = \"32MiB\"\ndirect_io = false\n\
             [workload]\nthreads = 2\n{workload}\n\
             [cache]\nmin_size = \"1MiB\"\nmax_size = \"2MiB\"\n\
             [run]\nduration = \"3s\"\nsample_interval = \"500ms\"\n{}",
            common::LENIENT_THRESHOLDS
        ),
    )
    .expect("write job");
    job
}

fn reduction(dir: &Path, out: &str, test: &str) -> DataReduction {
    valid_result(&dir.join(out).join("result.json"), test)
        .data_reduction
        .unwrap_or_else(|| panic!("{out}: no data_reduction"))
}

/// The measured compression ratio of every database and of all of them is the setting within
/// ±10%, its interval within ±2%, and fewer than 1% of the 8 KiB blocks repeat anywhere.
fn assert_holds(reduction: &DataReduction, setting: f64, what: &str) {
    let check = |name: &str, f: &ReductionFigures| {
        assert!(
            (f.compression_ratio / setting - 1.0).abs() <= 0.10,
            "{what} {name}: compression {:.3} against the setting {setting}: {f:?}",
            f.compression_ratio
        );
        assert!(
            f.compression_ratio_ci95_percent <= 2.0,
            "{what} {name}: interval ±{:.2}%",
            f.compression_ratio_ci95_percent
        );
        assert!(
            f.duplicate_share < 0.01,
            "{what} {name}: {:.3}% of blocks duplicated: {f:?}",
            f.duplicate_share * 100.0
        );
        // Every 8 KiB block of the 32 MiB file (a little more: the fill ends on an extent).
        assert!(f.blocks >= 4096, "{what} {name}: {f:?}");
        assert_eq!(
            f.blocks_hashed, f.blocks,
            "{what} {name}: small jobs hash every block"
        );
    };
    assert_eq!(reduction.databases.len(), 2, "{what}");
    for database in &reduction.databases {
        check(&database.instance, &database.figures);
    }
    check("all databases", &reduction.across_databases);
    assert_eq!(reduction.setting.compression_ratio, setting);
    assert_eq!(reduction.setting.dedup_ratio, 1.0);
    assert_eq!(reduction.setting.dedup_unit_bytes, 8192);
    assert_eq!(reduction.setting.compressor, "zstd level 1");
}

#[test]
fn init_and_checksum_measure_the_setting_at_one_two_and_four() {
    for setting in [1.0, 2.0, 4.0] {
        let dir = tempfile::tempdir().expect("tempdir");
        let job = job(dir.path(), &format!("compression_ratio = {setting:.1}"));
        let job = job.to_str().expect("utf-8");
        jetproof(dir.path())
            .args(["init", job, "--out", "init", "--quiet"])
            .assert()
            .success();
        let at_init = reduction(dir.path(), "init", "init");
        assert_holds(&at_init, setting, "init");
        jetproof(dir.path())
            .args(["checksum", job, "--out", "checksum", "--quiet"])
            .assert()
            .success();
        let read_back = reduction(dir.path(), "checksum", "checksum");
        assert_holds(&read_back, setting, "checksum");
        // What init measured as it wrote is what checksum reads back.
        for (written, read) in at_init.databases.iter().zip(&read_back.databases) {
            assert_eq!(written.figures.blocks, read.figures.blocks);
            assert_eq!(
                written.figures.duplicate_blocks,
                read.figures.duplicate_blocks
            );
            assert!(
                (written.figures.compression_ratio - read.figures.compression_ratio).abs() < 1e-9,
                "{written:?} {read:?}"
            );
        }
        let report = std::fs::read_to_string(dir.path().join("checksum/report.md")).expect("md");
        assert!(report.contains("## Data Reduction"), "{report}");
        assert!(report.contains("(All)"), "{report}");
        let html = std::fs::read_to_string(dir.path().join("init/report.html")).expect("html");
        assert!(html.contains("Data Reduction"), "report.html");
        let log = std::fs::read_to_string(dir.path().join("init/test.log")).expect("log");
        assert!(log.contains("no block repeated"), "{log}");
    }
}

#[test]
fn no_block_of_one_database_equals_a_block_of_another() {
    // Three databases at the default (incompressible): the copies init used to make repeated
    // every block of the first; now across all three fewer than 1% repeat (page headers and
    // the zero tails of header and map pages are all that can).
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job.toml");
    std::fs::write(
        &job,
        "[storage]\ndatabases = 3\ndb_size = \"32MiB\"\ndirect_io = false\n",
    )
    .expect("job");
    jetproof(dir.path())
        .args([
            "init",
            job.to_str().expect("utf-8"),
            "--out",
            "init",
            "--quiet",
        ])
        .assert()
        .success();
    let r = reduction(dir.path(), "init", "init");
    let all = &r.across_databases;
    let each: u64 = r.databases.iter().map(|d| d.figures.duplicate_blocks).sum();
    assert!(all.duplicate_share < 0.01, "{all:?}");
    // A block two databases share would count across them and in neither alone.
    assert!(
        all.duplicate_blocks <= each + 3 * 8,
        "blocks shared between databases: {} across, {each} within: {r:?}",
        all.duplicate_blocks
    );
    assert_eq!(
        all.blocks,
        r.databases.iter().map(|d| d.figures.blocks).sum::<u64>()
    );
}

/// `init`, then performance tests of `workload` (appended to the `[workload]` table) whose
/// checksum pass measures the files after the window (`run.checksum_after_performance`): the
/// last run's data reduction, and the bytes each database grew by over the runs. The runs repeat
/// on the same databases until each grew by more than `GROWN_ENOUGH` (at most `RUNS_AT_MOST`):
/// a 3 s window on a loaded machine grew one by 3.2 MiB.
fn after_a_run(dir: &Path, workload: &str) -> (DataReduction, Vec<u64>) {
    let job = job(dir, workload);
    let text = std::fs::read_to_string(&job).expect("job");
    std::fs::write(
        &job,
        // The window's verdict is not what this is about: 1-2 MiB caches stall for buffers
        // more than a thousand times a second under deletes.
        text.replace("[run]\n", "[run]\nchecksum_after_performance = true\n")
            .replace(
                "page_fault_stalls_per_sec = 1000",
                "page_fault_stalls_per_sec = 1000000",
            ),
    )
    .expect("job");
    let job = job.to_str().expect("utf-8");
    jetproof(dir)
        .args(["init", job, "--out", "init", "--quiet"])
        .assert()
        .success();
    let mut grown: Vec<u64> = Vec::new();
    let mut out = String::new();
    for n in 1..=RUNS_AT_MOST {
        out = format!("run{n}");
        run_performance(dir, job, &out);
        let run = common::result(&dir.join(&out).join("result.json"));
        let this: Vec<u64> = run["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| {
                i["db_used_final_bytes"].as_u64().unwrap_or(0)
                    - i["db_used_initial_bytes"].as_u64().unwrap_or(0)
            })
            .collect();
        grown.resize(this.len(), 0);
        for (g, t) in grown.iter_mut().zip(this) {
            *g += t;
        }
        if grown.iter().all(|g| *g > GROWN_ENOUGH) {
            break;
        }
    }
    (reduction(dir, &out, "performance"), grown)
}

/// `jetproof run JOB --test performance --out OUT --quiet` in `dir`, which must pass.
fn run_performance(dir: &Path, job: &str, out: &str) {
    jetproof(dir)
        .args(["run", job, "--test", "performance", "--out", out, "--quiet"])
        .assert()
        .success();
}

/// What the databases must have grown by for their new pages to show in the measured figures
/// (they were zeros before the engine filled them).
const GROWN_ENOUGH: u64 = 4 << 20;

/// The most runs `after_a_run` makes to grow the databases by `GROWN_ENOUGH`.
const RUNS_AT_MOST: usize = 6;

/// A run that grows the databases and frees space in their pages (inserts, deletes, replaces
/// of other sizes) leaves files that still compress at the setting, within ±10%, with fewer
/// than 1% of their 8 KiB blocks repeated anywhere: the engine fills the space it frees and the
/// pages it grows by with the job's content. Until it did (zeros), the 3 s run measured 2.5–2.8:1
/// at 2.0, 9–16% of the blocks zeros.
fn a_run_keeps_the_setting(setting: f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (after, grown) = after_a_run(
        dir.path(),
        &format!(
            "compression_ratio = {setting:.1}\ninsert_percent = 50\ndelete_percent = 20\n\
             replace_percent = 30\nread_percent = 0"
        ),
    );
    // The windows grew each database by enough to tell (its new pages were zeros before).
    for g in &grown {
        assert!(
            *g > GROWN_ENOUGH,
            "{RUNS_AT_MOST} windows grew too little to tell: {grown:?}"
        );
    }
    assert_eq!(after.databases.len(), 2);
    for f in after
        .databases
        .iter()
        .map(|d| &d.figures)
        .chain([&after.across_databases])
    {
        assert!(
            (f.compression_ratio / setting - 1.0).abs() <= 0.10,
            "after the run at {setting}: compression {:.3} (grown {grown:?}): {f:?}",
            f.compression_ratio
        );
        assert!(f.compression_ratio_ci95_percent <= 2.0, "{f:?}");
        assert_eq!(f.blocks_hashed, f.blocks, "{f:?}");
    }
    let all = &after.across_databases;
    eprintln!(
        "after the run at {setting}: grown {grown:?}, compression {:.3}, {:.3}% of blocks repeated, {} zeros",
        all.compression_ratio,
        all.duplicate_share * 100.0,
        all.zero_blocks
    );
    assert!(
        all.duplicate_share < 0.01,
        "after the run at {setting}: {:.2}% of the blocks repeat ({} zeros): {all:?}",
        all.duplicate_share * 100.0,
        all.zero_blocks
    );
}

#[test]
fn a_run_keeps_the_compression_setting_at_one() {
    a_run_keeps_the_setting(1.0);
}

#[test]
fn a_run_keeps_the_compression_setting_at_two() {
    a_run_keeps_the_setting(2.0);
}

#[test]
fn a_run_keeps_the_compression_setting_at_four() {
    a_run_keeps_the_setting(4.0);
}

#[test]
fn a_dedup_ratio_of_two_repeats_about_half_the_blocks_and_keeps_the_compression() {
    // dedup_ratio = 2.0: half of all 8 KiB blocks of the two databases repeat (attachments
    // copied from the job's pool on long-value pages), within ±10%, as init measures it
    // writing and checksum reading back, and after a run; the compression setting still holds.
    let dir = tempfile::tempdir().expect("tempdir");
    let job = job(dir.path(), "compression_ratio = 2.0\ndedup_ratio = 2.0");
    let job = job.to_str().expect("utf-8");
    jetproof(dir.path())
        .args(["init", job, "--out", "init", "--quiet"])
        .assert()
        .success();
    let half = |r: &DataReduction, what: &str| {
        let all = &r.across_databases;
        assert!(
            (0.45..=0.55).contains(&all.duplicate_share),
            "{what}: {:.2}% of blocks duplicated, set 50%: {all:?}",
            all.duplicate_share * 100.0
        );
        assert!(
            (all.compression_ratio / 2.0 - 1.0).abs() <= 0.10,
            "{what}: {all:?}"
        );
        assert_eq!(all.blocks_hashed, all.blocks, "{what}");
        // The pool is the job's: a copy in db2 of an attachment in db1 counts across them only.
        let within: u64 = r.databases.iter().map(|d| d.figures.duplicate_blocks).sum();
        assert!(all.duplicate_blocks > within, "{what}: {r:?}");
        for d in &r.databases {
            assert!(d.figures.duplicate_share > 0.3, "{what}: {d:?}");
        }
        assert_eq!(r.setting.dedup_ratio, 2.0);
    };
    let at_init = reduction(dir.path(), "init", "init");
    half(&at_init, "init");
    jetproof(dir.path())
        .args(["checksum", job, "--out", "checksum", "--quiet"])
        .assert()
        .success();
    let read_back = reduction(dir.path(), "checksum", "checksum");
    half(&read_back, "checksum");
    assert_eq!(
        at_init.across_databases.duplicate_blocks,
        read_back.across_databases.duplicate_blocks
    );
    // A run grows the databases by records and attachments in init's proportion (the engine
    // lays the long-value share of its growth down as attachments from the same pool), so the
    // share holds after it (50.9% of 26,112 blocks, measured): without that, the window's
    // growth (unique leaves only) thinned it to 27.6% of 15,360.
    run_performance(dir.path(), job, "run");
    let run = common::result(&dir.path().join("run/result.json"));
    jetproof(dir.path())
        .args(["checksum", job, "--out", "after", "--quiet"])
        .assert()
        .success();
    let after = reduction(dir.path(), "after", "checksum");
    let (init_all, after_all) = (&at_init.across_databases, &after.across_databases);
    eprintln!(
        "after the run: {:.2}% of {} blocks repeated (at init {:.2}% of {}), compression {:.3}",
        after_all.duplicate_share * 100.0,
        after_all.blocks,
        init_all.duplicate_share * 100.0,
        init_all.blocks,
        after_all.compression_ratio
    );
    // The window grew the files by enough to tell (by a fifth at least).
    assert!(
        after_all.blocks as f64 >= 1.2 * init_all.blocks as f64,
        "the window grew too little to tell: {after_all:?} {init_all:?}: {}",
        run["instances"]
    );
    half(&after, "after the run");
}

#[test]
fn a_dedup_ratio_the_pages_cannot_hold_is_refused_before_any_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 32 KiB pages of 8 KiB blocks: long values on at most 90% of the pages hold 2.50.
    let job = job(dir.path(), "dedup_ratio = 3.0");
    let (_, stderr) = common::run_expecting(
        dir.path(),
        &["init", job.to_str().expect("utf-8"), "--quiet"],
        2,
    );
    assert!(stderr.contains("workload.dedup_ratio"), "{stderr}");
    assert!(stderr.contains("to 2.50"), "{stderr}");
    assert!(!dir.path().join("jetproof-data").exists(), "nothing made");
    // A page of one block: its header is in every block, nothing can repeat.
    let job = self::job(dir.path(), "dedup_ratio = 1.5\ndedup_unit = \"32KiB\"");
    let (_, stderr) = common::run_expecting(
        dir.path(),
        &["init", job.to_str().expect("utf-8"), "--quiet"],
        2,
    );
    assert!(stderr.contains("workload.dedup_ratio"), "{stderr}");
    assert!(stderr.contains("storage.page_size of at least"), "{stderr}");
    for (key, value) in [
        ("compression_ratio", "0.5"),
        ("compression_ratio", "9.0"),
        ("dedup_ratio", "0.5"),
        ("dedup_unit", "\"3KiB\""),
        ("dedup_unit", "\"128KiB\""),
    ] {
        let job = self::job(dir.path(), &format!("{key} = {value}"));
        let (_, stderr) = common::run_expecting(
            dir.path(),
            &["init", job.to_str().expect("utf-8"), "--quiet"],
            2,
        );
        assert!(
            stderr.contains(&format!("workload.{key}")),
            "{key} = {value}: {stderr}"
        );
    }
}

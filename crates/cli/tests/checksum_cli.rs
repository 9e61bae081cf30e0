//! `jetproof checksum` through the real binary: databases made by `jetproof init`, then damaged
//! the way storage damages them (a flipped bit, a misdirected write, a truncation, garbage), and
//! each case found, located and mapped to its exit code.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

const PAGE_SIZE: usize = 8192;
const DB_SIZE: usize = 4 << 20;

/// Pages in a database file (init decides its final size; the header counts every page).
fn pages_of(path: &Path) -> usize {
    let len = std::fs::metadata(path).expect("database exists").len() as usize;
    assert_eq!(len % PAGE_SIZE, 0, "{} is {len} bytes", path.display());
    len / PAGE_SIZE
}

fn jetproof(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("jetproof").expect("binary built");
    cmd.current_dir(dir);
    cmd
}

/// A small job: 4 MiB databases of 8 KiB pages, buffered I/O so it runs on any file system.
fn small_job(dir: &Path, databases: u32) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndatabases = {databases}\ndb_size = \"4MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n[cache]\nmin_size = \"1MiB\"\nmax_size = \"2MiB\"\n[workload]\nrecord_size = \"1KiB\"\n"
        ),
    )
    .expect("write job");
    job
}

fn database(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("jetproof-data/db{n}/db{n}.jpdb"))
}

/// Creates the job's databases with `jetproof init`.
fn init(dir: &Path, databases: u32) -> PathBuf {
    let job = small_job(dir, databases);
    jetproof(dir)
        .args([
            "init",
            job.to_str().expect("utf-8"),
            "--out",
            "init-results",
        ])
        .assert()
        .success();
    job
}

fn result_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("result.json written");
    serde_json::from_str(&text).expect("valid JSON")
}

/// An instance's checksum figures: flattened into the instance object (`docs/results.md`), or under
/// `extra` in results written before that layout.
fn figures(result: &serde_json::Value, instance: usize) -> serde_json::Value {
    let object = &result["instances"][instance];
    if object.get("pages_seen").is_some() {
        object.clone()
    } else {
        object["extra"].clone()
    }
}

fn checksum(dir: &Path, job: &Path, out: &str) -> assert_cmd::assert::Assert {
    jetproof(dir)
        .args(["checksum", job.to_str().expect("utf-8"), "--out", out])
        .assert()
}

#[test]
fn checksum_after_init_is_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = init(dir.path(), 2);
    let before = std::fs::read(database(dir.path(), 1)).expect("read db1");
    let pages = [
        pages_of(&database(dir.path(), 1)),
        pages_of(&database(dir.path(), 2)),
    ];
    checksum(dir.path(), &job, "r")
        .code(0)
        .stdout(predicate::str::contains("Checksum Statistics"))
        .stdout(predicate::str::contains("Wrong page-number pages"))
        .stdout(predicate::str::contains("pass"));
    let result = result_json(&dir.path().join("r/result.json"));
    assert_eq!(result["test"], "checksum");
    assert_eq!(result["verdict"], "pass");
    for (instance, pages_in_file) in pages.iter().enumerate() {
        let figures = figures(&result, instance);
        assert_eq!(figures["pages_seen"], *pages_in_file, "{result}");
        assert_eq!(figures["pages_bad"], 0, "{result}");
        assert_eq!(figures["pages_correctable"], 0, "{result}");
        assert_eq!(figures["pages_wrong_number"], 0, "{result}");
        assert!(figures["mb_per_sec"].as_f64() > Some(0.0), "{result}");
    }
    assert_eq!(
        result["totals"]["pages_seen"],
        pages[0] + pages[1],
        "{result}"
    );
    let log = std::fs::read_to_string(dir.path().join("r/test.log")).expect("test.log");
    assert!(log.contains("Checksum Statistics"), "{log}");
    // Never writes.
    assert_eq!(
        std::fs::read(database(dir.path(), 1)).expect("read db1"),
        before
    );
}

#[test]
fn checksum_finds_a_flipped_bit_in_the_middle_as_correctable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = init(dir.path(), 1);
    let path = database(dir.path(), 1);
    let mut bytes = std::fs::read(&path).expect("read db");
    let middle_page = pages_of(&path) / 2;
    let byte_in_page = 3001;
    bytes[middle_page * PAGE_SIZE + byte_in_page] ^= 0x04;
    std::fs::write(&path, &bytes).expect("damage db");

    checksum(dir.path(), &job, "r")
        .code(1)
        .stdout(predicate::str::contains(format!(
            "page {middle_page} (byte offset {})",
            middle_page * PAGE_SIZE
        )))
        .stdout(predicate::str::contains("correctable page"))
        .stdout(predicate::str::contains("FAIL"));
    let result = result_json(&dir.path().join("r/result.json"));
    assert_eq!(result["verdict"], "fail");
    let figures = figures(&result, 0);
    assert_eq!(figures["pages_correctable"], 1, "{result}");
    assert_eq!(figures["pages_bad"], 0, "{result}");
    assert_eq!(figures["damaged_pages"][0]["page_number"], middle_page);
    assert_eq!(figures["damaged_pages"][0]["damage"], "correctable");
    assert_eq!(figures["damaged_pages"][0]["bit"], byte_in_page * 8 + 2);
    // Reported, never repaired.
    assert_eq!(std::fs::read(&path).expect("read db"), bytes);
}

#[test]
fn checksum_finds_a_page_copied_over_another_as_wrong_page_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = init(dir.path(), 1);
    let path = database(dir.path(), 1);
    let mut bytes = std::fs::read(&path).expect("read db");
    let (from, to) = (100usize, 300usize);
    let page = bytes[from * PAGE_SIZE..(from + 1) * PAGE_SIZE].to_vec();
    bytes[to * PAGE_SIZE..(to + 1) * PAGE_SIZE].copy_from_slice(&page);
    std::fs::write(&path, &bytes).expect("damage db");

    checksum(dir.path(), &job, "r")
        .code(1)
        .stdout(predicate::str::contains(format!("page {to} ")))
        .stdout(predicate::str::contains(format!(
            "wrong page-number page (it carries page number {from}"
        )));
    let result = result_json(&dir.path().join("r/result.json"));
    let figures = figures(&result, 0);
    assert_eq!(figures["pages_wrong_number"], 1, "{result}");
    assert_eq!(figures["damaged_pages"][0]["page_number"], to);
    assert_eq!(figures["damaged_pages"][0]["found_page_number"], from);
}

#[test]
fn checksum_counts_garbage_pages_as_bad() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = init(dir.path(), 1);
    let path = database(dir.path(), 1);
    let mut bytes = std::fs::read(&path).expect("read db");
    // Ten pages of a pattern no checksum matches, and one zeroed page.
    for (i, byte) in bytes[200 * PAGE_SIZE..210 * PAGE_SIZE]
        .iter_mut()
        .enumerate()
    {
        *byte = (i * 7 + 13) as u8;
    }
    bytes[400 * PAGE_SIZE..401 * PAGE_SIZE].fill(0);
    std::fs::write(&path, &bytes).expect("damage db");
    checksum(dir.path(), &job, "r")
        .code(1)
        .stdout(predicate::str::contains("page 400 "));
    let result = result_json(&dir.path().join("r/result.json"));
    assert_eq!(figures(&result, 0)["pages_bad"], 11, "{result}");
}

#[test]
fn checksum_refuses_a_truncated_file_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = init(dir.path(), 1);
    let path = database(dir.path(), 1);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open db");
    let len = file.metadata().expect("stat").len();
    file.set_len(len / 3).expect("truncate");
    checksum(dir.path(), &job, "r")
        .code(3)
        .stderr(predicate::str::contains("db1.jpdb"))
        .stderr(predicate::str::contains("truncated"))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn checksum_refuses_foreign_and_garbage_files_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), 1);
    let path = database(dir.path(), 1);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let garbage: Vec<u8> = (0..DB_SIZE as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect();
    for (what, content) in [
        ("foreign", b"%PDF-1.7 not a database\n".repeat(4000)),
        ("garbage", garbage),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&path, &content).expect("write file");
        checksum(dir.path(), &job, what)
            .code(3)
            .stderr(predicate::str::contains("db1.jpdb"))
            .stderr(predicate::str::contains("panicked").not());
        assert_eq!(std::fs::read(&path).expect("read back"), content, "{what}");
    }
}

#[test]
fn checksum_without_databases_says_to_run_init() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = small_job(dir.path(), 1);
    checksum(dir.path(), &job, "r")
        .code(2)
        .stderr(predicate::str::contains("jetproof init"))
        .stderr(predicate::str::contains("db1.jpdb"));
    assert!(!dir.path().join("r").exists(), "nothing done on bad input");
}

#[test]
fn checksum_refuses_bad_job_fields_naming_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("bad.toml");
    std::fs::write(&job, "[storage]\npage_size = \"12KiB\"\n").expect("write job");
    checksum(dir.path(), &job, "r")
        .code(2)
        .stderr(predicate::str::contains("storage.page_size"));
    std::fs::write(&job, "[storage]\ndatabses = 2\n").expect("write job");
    checksum(dir.path(), &job, "r")
        .code(2)
        .stderr(predicate::str::contains("databses"));
    jetproof(dir.path())
        .args(["checksum", "--databases", "0", "--out", "r"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--databases"));
    assert!(!dir.path().join("r").exists(), "nothing done on bad input");
}

//! `jetproof job --from-solution SOLUTION` through the real binary (issue 32, item 11): the job
//! every server of a solution runs, taken out of the solution file `plan --write-solution`
//! wrote, at ESRP's scale or, with `--rehearsal`, at the solution's rehearsal scale and marked
//! `run.rehearsal`; what the playbook (`deploy/ansible/solution.yml`) writes on each host. A
//! rehearsal's run says so in its report, and `jetproof esrp` marks the whole document a
//! rehearsal (title, first page, a requirement not met), which `--verify` checks. Bad input:
//! exit 2, nothing written.

mod common;

use std::path::{Path, PathBuf};

use common::{jetproof, result};
use predicates::prelude::*;

/// One server, one database of 20 mailboxes of 640 KiB: a 13,107,200-byte test database.
const SIZING: [&str; 12] = [
    "--mailboxes",
    "20",
    "--iops-per-mailbox",
    "0.5",
    "--headroom",
    "0",
    "--servers",
    "1",
    "--databases-per-server",
    "1",
    "--mailbox-size",
    "640KiB",
];

/// `plan ... --write-solution root/solution.toml --hosts h1`.
fn solution(root: &Path) -> PathBuf {
    let path = root.join("solution.toml");
    jetproof(root)
        .arg("plan")
        .args(SIZING)
        .arg("--write-solution")
        .arg(&path)
        .args(["--hosts", "h1"])
        .assert()
        .success();
    path
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).expect("readable");
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// `table.key` of a TOML table, as a table.
fn sub<'a>(table: &'a mut toml::Table, key: &str) -> &'a mut toml::Table {
    table
        .entry(key)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .unwrap_or_else(|| panic!("{key} is a table"))
}

/// Edits the solution file as its reader would by hand (its first line, jetproof's marker, is
/// kept).
fn edit_solution(path: &Path, change: impl FnOnce(&mut toml::Table)) {
    let text = std::fs::read_to_string(path).expect("readable");
    let marker = text.lines().next().expect("a first line").to_string();
    let mut table: toml::Table = toml::from_str(&text).expect("TOML");
    change(&mut table);
    std::fs::write(
        path,
        format!("{marker}\n{}", toml::to_string(&table).expect("TOML")),
    )
    .expect("write");
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn from_solution_is_the_solutions_job_at_esrp_or_rehearsal_scale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let path = solution(root);

    // As written: ESRP's test set, the plan's database.
    let out = jetproof(root)
        .args(["job", "--from-solution"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let printed: toml::Table = toml::from_str(&String::from_utf8_lossy(&out.stdout)).expect("TOML");
    let run = printed["run"].as_table().expect("[run]");
    assert_eq!(run["duration"].as_str(), Some("2h"));
    assert_eq!(run["stress_duration"].as_str(), Some("1day"));
    assert_eq!(run["recovery_log_files"].as_integer(), Some(500));
    assert_eq!(run["checksum_after_performance"].as_bool(), Some(true));
    assert_eq!(run["rehearsal"].as_bool(), Some(false));
    assert_eq!(
        printed["simulation"]["mailboxes"].as_integer(),
        Some(20),
        "the plan's mailboxes per server"
    );

    // At the rehearsal scale, for host h1 with its own data directory, written to a file.
    let job = root.join("job.toml");
    for _ in 0..2 {
        // Twice: the second overwrites the file jetproof wrote.
        jetproof(root)
            .args(["job", "--from-solution"])
            .arg(&path)
            .args([
                "--rehearsal",
                "--host",
                "h1",
                "--data-dir",
                "/srv/h1-data",
                "--write",
            ])
            .arg(&job)
            .assert()
            .success();
    }
    let text = std::fs::read_to_string(&job).expect("written");
    assert_eq!(text.lines().next(), Some("# Written by `jetproof plan`."));
    let written = read_toml(&job);
    let run = written["run"].as_table().expect("[run]");
    assert_eq!(
        run["duration"].as_str(),
        Some("2m"),
        "rehearsal.performance"
    );
    assert_eq!(
        run["stress_duration"].as_str(),
        Some("5m"),
        "rehearsal.stress"
    );
    assert_eq!(run["recovery_log_files"].as_integer(), Some(20));
    assert_eq!(run["rehearsal"].as_bool(), Some(true));
    assert_eq!(
        written["storage"]["data_dir"].as_str(),
        Some("/srv/h1-data")
    );
    // Everything else is the solution's job.
    assert_eq!(written["storage"]["db_size"], printed["storage"]["db_size"]);
    assert_eq!(written["cache"], printed["cache"]);
    // It reads back as a job file.
    jetproof(root).arg("job").arg(&job).assert().success();

    // An optional sample interval of the rehearsal is used.
    edit_solution(&path, |s| {
        sub(s, "rehearsal").insert("sample_interval".into(), "500ms".into());
    });
    let out = jetproof(root)
        .args(["job", "--rehearsal", "--from-solution"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let printed: toml::Table = toml::from_str(&String::from_utf8_lossy(&out.stdout)).expect("TOML");
    assert_eq!(printed["run"]["sample_interval"].as_str(), Some("500ms"));
}

#[test]
fn from_solution_refusals_exit_2_writing_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let path = solution(root);
    let job = root.join("job.toml");
    let refused = |args: &[&str], solution: &Path, says: &[&str]| {
        let out = jetproof(root)
            .args(["job", "--from-solution"])
            .arg(solution)
            .args(args)
            .arg("--write")
            .arg(&job)
            .output()
            .expect("runs");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for word in says {
            assert!(err.contains(word), "{args:?}: {word:?} not in {err}");
        }
        assert!(!job.exists(), "{args:?}: wrote {}", job.display());
    };
    // A host the solution does not name.
    refused(&["--host", "h9"], &path, &["`--host` h9", "h1"]);

    // No [job], no [rehearsal], an unknown rehearsal key, a rehearsal duration that is none.
    let copy = |name: &str, change: &dyn Fn(&mut toml::Table)| -> PathBuf {
        let other = root.join(name);
        std::fs::copy(&path, &other).expect("copy");
        edit_solution(&other, change);
        other
    };
    let no_job = copy("no-job.toml", &|s| {
        s.remove("job");
    });
    refused(&[], &no_job, &["no `[job]`", "--write-solution"]);
    let no_rehearsal = copy("no-rehearsal.toml", &|s| {
        s.remove("rehearsal");
    });
    refused(&["--rehearsal"], &no_rehearsal, &["`[rehearsal]`"]);
    let unknown = copy("unknown.toml", &|s| {
        sub(s, "rehearsal").insert("warmup".into(), "1m".into());
    });
    refused(
        &["--rehearsal"],
        &unknown,
        &["rehearsal.warmup", "performance"],
    );
    let bad_span = copy("bad-span.toml", &|s| {
        sub(s, "rehearsal").insert("performance".into(), "soon".into());
    });
    refused(
        &["--rehearsal"],
        &bad_span,
        &["rehearsal.performance", "soon"],
    );
    let no_logs = copy("no-logs.toml", &|s| {
        sub(s, "rehearsal").insert("soft_recovery_log_files".into(), 0.into());
    });
    refused(
        &["--rehearsal"],
        &no_logs,
        &["rehearsal.soft_recovery_log_files"],
    );
    // A job the solution's reader broke by hand: named as the solution's job.
    let bad_job = copy("bad-job.toml", &|s| {
        sub(sub(s, "job"), "storage").insert("databases".into(), 0.into());
    });
    refused(&[], &bad_job, &["[job]", "storage.databases"]);

    // A file jetproof did not write is never overwritten.
    std::fs::write(&job, "mine\n").expect("write");
    let out = jetproof(root)
        .args(["job", "--from-solution"])
        .arg(&path)
        .arg("--write")
        .arg(&job)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("refuses to overwrite"));
    assert_eq!(std::fs::read_to_string(&job).expect("kept"), "mine\n");

    // The flags that only mean something with --from-solution.
    for flag in [
        &["--rehearsal"][..],
        &["--host", "h1"],
        &["--data-dir", "d"],
        &["--write", "w.toml"],
    ] {
        let out = jetproof(root)
            .args(["job", "--default"])
            .args(flag)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(flag[0]) && stderr_of(&out).contains("--from-solution"),
            "{flag:?}: {}",
            stderr_of(&out)
        );
        assert!(!root.join("w.toml").exists());
    }
}

#[test]
fn a_rehearsal_says_so_in_its_report_and_marks_the_esrp_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let path = solution(root);
    // The solution's job edited for a quick run on any file system: buffered I/O, a cache far
    // below the 13 MB database, small log files, lenient thresholds; a 2 s rehearsal.
    edit_solution(&path, |s| {
        let job = sub(s, "job");
        sub(job, "storage").insert("direct_io".into(), false.into());
        let cache = sub(job, "cache");
        cache.insert("min_size".into(), "512KiB".into());
        cache.insert("max_size".into(), "1MiB".into());
        let workload = sub(job, "workload");
        workload.insert("record_size".into(), "1KiB".into());
        workload.insert("threads".into(), 1.into());
        let log = sub(job, "log");
        log.insert("file_size".into(), "256KiB".into());
        log.insert("buffer_size".into(), "64KiB".into());
        let thresholds = sub(job, "thresholds");
        for (key, value) in [
            ("db_read_avg_ms", 1000.0),
            ("db_read_max_ms", 10000.0),
            ("log_write_avg_ms", 1000.0),
            ("log_write_max_ms", 10000.0),
            ("page_fault_stalls_per_sec", 1000.0),
        ] {
            thresholds.insert(key.into(), value.into());
        }
        let rehearsal = sub(s, "rehearsal");
        rehearsal.insert("performance".into(), "2s".into());
        rehearsal.insert("sample_interval".into(), "500ms".into());
    });
    jetproof(root)
        .args(["job", "--from-solution"])
        .arg(&path)
        .args([
            "--rehearsal",
            "--host",
            "h1",
            "--data-dir",
            "data",
            "--write",
            "job.toml",
        ])
        .assert()
        .success();
    jetproof(root)
        .args(["init", "job.toml", "--out", "init", "--quiet"])
        .assert()
        .success();
    let out = jetproof(root)
        .args([
            "run",
            "job.toml",
            "--test",
            "performance",
            "--host-name",
            "h1",
            "--out",
            "results/h1/performance",
        ])
        .output()
        .expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        stderr_of(&out)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("Rehearsal: REHEARSAL"), "{summary}");
    let dir_h1 = root.join("results/h1/performance");
    let r = result(&dir_h1.join("result.json"));
    assert_eq!(r["parameters"]["run"]["rehearsal"], true);
    let report = std::fs::read_to_string(dir_h1.join("report.md")).expect("report.md");
    assert_eq!(
        report.lines().next(),
        Some("# jetproof performance test report (REHEARSAL)")
    );
    assert!(
        report.contains("| Rehearsal | REHEARSAL: a dry run"),
        "{report}"
    );

    // The document: its title, its first page and a requirement say it is a rehearsal.
    let out = jetproof(root)
        .args(["esrp", "solution.toml", "results", "--out", "esrp"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let md = std::fs::read_to_string(root.join("esrp/esrp.md")).expect("esrp.md");
    let first = md.lines().next().expect("a title");
    assert!(first.ends_with("(REHEARSAL)"), "{first}");
    // The solution as `plan` writes it has no vendor or product yet: the title says so
    // instead of an empty name ("#  : Exchange ...").
    assert!(
        first.starts_with("# Exchange ")
            && first.contains("(vendor and product not given: `vendor` and `product`"),
        "{first}"
    );
    let mark = md
        .lines()
        .find(|l| l.starts_with("**REHEARSAL, NOT AN ESRP TEST.**"))
        .unwrap_or_else(|| panic!("no rehearsal mark:\n{md}"));
    assert!(mark.contains("h1 performance"), "{mark}");
    let requirement = md
        .lines()
        .find(|l| l.starts_with("| Not a rehearsal |"))
        .expect("the requirement");
    assert!(requirement.ends_with("| NO |"), "{requirement}");
    assert!(md.contains("NOT A COMPLETE ESRP TEST SET"));
    let html = std::fs::read_to_string(root.join("esrp/esrp.html")).expect("esrp.html");
    assert!(html.contains("REHEARSAL, NOT AN ESRP TEST."));
    // The appendix carries the host's report, marked too.
    assert!(md.contains("| Rehearsal | REHEARSAL: a dry run"));

    // --verify agrees; a copy without the mark disagrees, naming it.
    let verify = |md: &str| {
        jetproof(root)
            .args(["esrp", "solution.toml", "results", "--verify", md])
            .output()
            .expect("runs")
    };
    let out = verify("esrp/esrp.md");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains(", 0 disagree"), "{said}");
    std::fs::write(
        root.join("unmarked.md"),
        md.replace("**REHEARSAL, NOT AN ESRP TEST.**", "")
            .replacen(" (REHEARSAL)\n", "\n", 1),
    )
    .expect("write");
    let out = verify("unmarked.md");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("is not marked a rehearsal") && said.contains("h1 performance"),
        "{said}"
    );
    assert!(said.contains("title does not say so"), "{said}");

    // The aggregate of the rehearsal's hosts says so too: its title and its summary.
    jetproof(root)
        .args(["aggregate", "results", "--out", "agg"])
        .assert()
        .code(predicates::ord::eq(0).or(predicates::ord::eq(1)));
    let agg = std::fs::read_to_string(root.join("agg/performance/report.md"))
        .or_else(|_| std::fs::read_to_string(root.join("agg/report.md")))
        .expect("the aggregate's report.md");
    let title = agg.lines().next().expect("a title");
    assert!(title.ends_with("(REHEARSAL)"), "{title}");
    assert!(
        agg.contains("| Rehearsal | REHEARSAL: a dry run")
            && agg.contains("not an ESRP test: h1 |"),
        "{agg}"
    );
    let whole = result(&root.join(if root.join("agg/performance").is_dir() {
        "agg/performance/result.json"
    } else {
        "agg/result.json"
    }));
    assert_eq!(whole["hosts"][0]["rehearsal"], true, "{whole}");
}

#[test]
fn list_tests_is_the_solutions_test_set_and_refuses_a_tests_table_the_job_contradicts() {
    // `--list-tests` prints the `[tests]` table's set, one `run --test` name per line (what
    // the playbook runs); the table and the job must agree, or the document's reader would see
    // one test set while another runs.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let path = solution(root);
    let list = |solution: &Path, extra: &[&str]| {
        let out = jetproof(root)
            .args(["job", "--from-solution"])
            .arg(solution)
            .args(extra)
            .arg("--list-tests")
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr_of(&out),
        )
    };
    let (code, out, err) = list(&path, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "performance\nstress\nbackup\nsoft-recovery\n");

    // The reader leaves backup out: the set has three tests, at either scale.
    let no_backup = root.join("no-backup.toml");
    std::fs::copy(&path, &no_backup).expect("copy");
    edit_solution(&no_backup, |s| {
        sub(s, "tests").insert("backup".into(), toml::Value::Boolean(false));
    });
    for extra in [&[][..], &["--rehearsal"][..]] {
        let (code, out, err) = list(&no_backup, extra);
        assert_eq!(code, Some(0), "{extra:?}: {err}");
        assert_eq!(out, "performance\nstress\nsoft-recovery\n", "{extra:?}");
    }

    // A performance duration edited in the table but not in the job: refused at ESRP's scale,
    // naming both keys, whether listing or writing the job (nothing written).
    let longer = root.join("longer.toml");
    std::fs::copy(&path, &longer).expect("copy");
    edit_solution(&longer, |s| {
        sub(s, "tests").insert("performance".into(), toml::Value::String("3h".into()));
    });
    let (code, _, err) = list(&longer, &[]);
    assert_eq!(code, Some(2), "{err}");
    for word in [
        "`tests.performance` is 3h",
        "`run.duration`",
        "make them agree",
    ] {
        assert!(err.contains(word), "{word:?} not in {err}");
    }
    let job = root.join("job.toml");
    let out = jetproof(root)
        .args(["job", "--from-solution"])
        .arg(&longer)
        .arg("--write")
        .arg(&job)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(!job.exists(), "wrote {}", job.display());
    // At the rehearsal scale the durations are the rehearsal's: the same file is accepted.
    let (code, out, err) = list(&longer, &["--rehearsal"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "performance\nstress\nbackup\nsoft-recovery\n");

    // A checksum pass the table asks for and the job does not: refused at either scale.
    let checksum = root.join("checksum.toml");
    std::fs::copy(&path, &checksum).expect("copy");
    edit_solution(&checksum, |s| {
        let on = sub(s, "tests")["checksum_after_stress"]
            .as_bool()
            .expect("a bool");
        sub(s, "tests").insert("checksum_after_stress".into(), toml::Value::Boolean(!on));
    });
    let (code, _, err) = list(&checksum, &["--rehearsal"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`run.checksum_after_stress`"), "{err}");

    // An unknown key of the table, and --list-tests without a solution.
    let unknown = root.join("unknown.toml");
    std::fs::copy(&path, &unknown).expect("copy");
    edit_solution(&unknown, |s| {
        sub(s, "tests").insert("tape".into(), toml::Value::Boolean(true));
    });
    let (code, _, err) = list(&unknown, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown key `tests.tape`"), "{err}");
    let out = jetproof(root)
        .args(["job", "--default", "--list-tests"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("--from-solution"),
        "{}",
        stderr_of(&out)
    );
}

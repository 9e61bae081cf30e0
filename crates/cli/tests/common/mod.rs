//! What the CLI test binaries share: the binary, a small job, reading a result.
// Each test binary uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The real `jetproof` binary, run in `dir`.
pub fn jetproof(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("jetproof").expect("binary built");
    cmd.current_dir(dir);
    cmd
}

/// Two 8 MiB databases of 8 KiB pages with a 1 MiB cache, buffered I/O (runs on any file
/// system), two sessions, a `duration` window sampled every half second; `extra` is TOML
/// appended after the `[run]` table (more tables).
pub fn small_job(dir: &Path, duration: &str, extra: &str) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[storage]\ndatabases = 2\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 2\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"{duration}\"\nsample_interval = \"500ms\"\n{extra}"
        ),
    )
    .expect("write job");
    job
}

/// A `result.json`, parsed.
pub fn result(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result.json")).expect("valid JSON")
}

//! What the CLI test binaries share: the binary, a small job, reading a result.
// Each test binary uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use jetproof_test_support::job::SmallJob;

/// The real `jetproof` binary, run in `dir`.
pub fn jetproof(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("jetproof").expect("binary built");
    cmd.current_dir(dir);
    cmd
}

/// Thresholds far above any healthy device's, for tests about something other than the verdict:
/// on a shared 2-core CI machine a test's fsyncs can stall behind another test's for 200 ms, and
/// a half-second sample holding one such stall exceeds the 100 ms default maximum; and these
/// jobs' 1 MiB caches (128 pages for two sessions) run out of free buffers a few times a second,
/// above Jetstress's one page fault stall per second. The defaults are checked in
/// `jetproof-job`'s unit tests; the verdict's reasons in `run_cli`'s impossible-threshold tests.
pub const LENIENT_THRESHOLDS: &str = "[thresholds]\ndb_read_avg_ms = 1000\ndb_read_max_ms = 10000\n\
                                      log_write_avg_ms = 1000\nlog_write_max_ms = 10000\n\
                                      page_fault_stalls_per_sec = 1000\n";

/// Two 8 MiB databases of 8 KiB pages with a 1 MiB cache, buffered I/O (runs on any file
/// system), two sessions, a `duration` window sampled every half second; `extra` is TOML
/// appended after the `[run]` table (more tables). Unless `extra` has its own `[thresholds]`,
/// the job carries [`LENIENT_THRESHOLDS`]. The text is `jetproof_test_support::job::SmallJob`'s.
pub fn small_job(dir: &Path, duration: &str, extra: &str) -> PathBuf {
    let thresholds = if extra.contains("[thresholds]") {
        ""
    } else {
        LENIENT_THRESHOLDS
    };
    SmallJob {
        duration: duration.to_string(),
        extra: format!("{extra}{thresholds}"),
        ..SmallJob::new(2, "8MiB")
    }
    .write(&dir.join("job.toml"))
}

/// A `result.json`, parsed.
pub fn result(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result.json")).expect("valid JSON")
}

/// A `result.json` checked against the schema (`docs/results.md`): it reads back as
/// `jetproof_results::TestResult` of the current schema version, names `test`, its verdict
/// agrees with its reasons, its times and duration are coherent, the test log and `report.md`
/// sit beside it, and every I/O class's figures agree with each other. Returns the parsed result.
pub fn valid_result(path: &Path, test: &str) -> jetproof_results::TestResult {
    let text = std::fs::read_to_string(path).expect("result.json");
    let result: jetproof_results::TestResult = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not fit the schema: {e}\n{text}", path.display()));
    assert_eq!(result.schema_version, jetproof_results::SCHEMA_VERSION);
    assert_eq!(result.test.name(), test, "{text}");
    // The typed sections know every key jetproof wrote, with its number type: the result
    // serialises back to the same document (`jetproof_results::sections`).
    let written: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let again = serde_json::to_value(&result).expect("serialises");
    same_json(&written, &again, "result");
    assert_eq!(
        result.verdict == jetproof_results::Verdict::Fail,
        !result.reasons.is_empty(),
        "the verdict must be fail exactly when there are reasons: {text}"
    );
    assert!(
        result.started.ends_with('Z') && result.ended.ends_with('Z'),
        "{text}"
    );
    assert!(result.started <= result.ended, "{text}");
    assert!(result.duration_s > 0.0, "{text}");
    assert!(!result.instances.is_empty(), "{text}");
    let dir = path.parent().expect("results directory");
    assert!(
        dir.join("report.md").exists(),
        "report.md beside {}",
        path.display()
    );
    let html = std::fs::read_to_string(dir.join("report.html"))
        .unwrap_or_else(|e| panic!("report.html beside {}: {e}", path.display()));
    assert!(
        html.contains("id=\"verdict\"") && html.contains("default-src 'none'"),
        "report.html beside {} has its verdict and its Content-Security-Policy",
        path.display()
    );
    let log = result.log_file.as_ref().expect("log_file");
    let log = if log.is_absolute() {
        log.clone()
    } else {
        // Relative to the working directory of the run, which holds the results directory.
        dir.parent().expect("run directory").join(log)
    };
    assert!(log.exists(), "{} missing", log.display());
    for instance in &result.instances {
        for (class, c) in &instance.io {
            let context = format!("{} {class}: {c:?}", instance.name);
            assert!(c.count > 0, "{context}");
            assert!(
                (c.avg_bytes - c.bytes as f64 / c.count as f64).abs() < 1e-6 * c.avg_bytes.max(1.0),
                "{context}"
            );
            assert!(c.ops_per_sec > 0.0, "{context}");
            assert!(
                c.p50_ms <= c.p95_ms && c.p95_ms <= c.p99_ms && c.p99_ms <= c.p999_ms,
                "{context}"
            );
            assert!(c.p999_ms <= c.max_ms * 1.01 + 1e-6, "{context}");
            assert!(c.avg_latency_ms <= c.max_ms + 1e-9, "{context}");
        }
    }
    result
}

/// The real `jetproof` binary started in `dir` with `args`, not waited for. Its output is kept
/// for [`interrupt`] when `capture`, else discarded.
pub fn spawn_jetproof(dir: &Path, args: &[&str], capture: bool) -> std::process::Child {
    let output = || {
        if capture {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        }
    };
    std::process::Command::new(assert_cmd::cargo::cargo_bin("jetproof"))
        .current_dir(dir)
        .args(args)
        .stdout(output())
        .stderr(output())
        .spawn()
        .expect("spawn jetproof")
}

/// Runs the real binary in `dir` with `args`; asserts its exit code, returns stdout and stderr.
pub fn run_expecting(dir: &Path, args: &[&str], code: i32) -> (String, String) {
    let output = jetproof(dir).args(args).output().expect("runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    );
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// `jetproof run JOB --test performance --out OUT` started in `dir`, returned once its test log
/// shows the first sample of the measured window (the databases dirty and being written), within
/// 120 s; fails if it ends before.
pub fn spawn_until_measuring(dir: &Path, job: &str, out: &str) -> std::process::Child {
    let mut child = spawn_jetproof(
        dir,
        &["run", job, "--test", "performance", "--out", out],
        false,
    );
    let started = std::time::Instant::now();
    loop {
        let log = std::fs::read_to_string(dir.join(out).join("test.log")).unwrap_or_default();
        if log.contains("Sample at 1 s") {
            return child;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "no sample within 120 s: {log}"
        );
        assert!(
            child.try_wait().expect("poll").is_none(),
            "ended early: {log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `len` bytes of the device (or file) at `path` from `offset`.
pub fn read_device_at(path: &str, offset: u64, len: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).expect("open device");
    file.seek(SeekFrom::Start(offset)).expect("seek");
    let mut bytes = vec![0u8; len];
    file.read_exact(&mut bytes).expect("read device");
    bytes
}

/// What an exclusive open (`O_EXCL`, as mkfs or a mount takes a device) of `device` meets now:
/// `None` when it could open it (then closed at once), else its errno (`EBUSY`: held).
pub fn exclusive_open_error(device: &Path) -> Option<i32> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(device)
        .err()
        .map(|e| e.raw_os_error().unwrap_or(0))
}

/// Ctrl-C: sends SIGINT to `child` and waits, at most 30 s, for it to end. Its exit status,
/// standard output and standard error.
pub fn interrupt(child: std::process::Child) -> (std::process::ExitStatus, String, String) {
    signal(child, "INT")
}

/// Sends signal `name` ("INT", "TERM", "HUP") to `child` and waits, at most 30 s, for it to
/// end. Its exit status, standard output and standard error.
pub fn signal(
    mut child: std::process::Child,
    name: &str,
) -> (std::process::ExitStatus, String, String) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let interrupted = std::time::Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("poll") {
            break exit;
        }
        if interrupted.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            panic!("jetproof did not stop within 30 s of SIG{name}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let output = child.wait_with_output().expect("output");
    (
        exit,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The `.jplog` generation files in `logs`, oldest first.
pub fn generation_files(logs: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(logs)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jplog"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Panics, naming the place, unless `a` and `b` have the same keys, arrays and values, integers
/// equal and of the same kind, floating-point numbers equal to the last place or two (serde_json's
/// default parsing may be one unit in the last place off).
pub fn same_json(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let (kx, ky): (Vec<&String>, Vec<&String>) = (x.keys().collect(), y.keys().collect());
            assert_eq!(kx, ky, "{at}: keys differ");
            for (key, value) in x {
                same_json(value, &y[key], &format!("{at}.{key}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths differ");
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                same_json(u, v, &format!("{at}[{i}]"));
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            assert!(x.is_f64() && y.is_f64(), "{at}: {x} and {y} differ in kind");
            let (u, v) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            assert!(
                (u - v).abs() <= 1e-14 * u.abs().max(v.abs()),
                "{at}: {u} and {v} differ"
            );
        }
        _ => assert_eq!(a, b, "{at}: differ"),
    }
}

/// Headless Chromium on the PATH (Debian's `chromium`), or None with the skip printed: a missing
/// browser fails the calling test when `JETPROOF_REQUIRE_CHROMIUM` is set (`.ci/run` sets it).
pub fn chromium_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .flat_map(|dir| ["chromium", "chromium-browser"].map(|n| dir.join(n)))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("JETPROOF_REQUIRE_CHROMIUM").is_none(),
            "chromium is required (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
    }
    found
}

/// A loop device over a file, detached when dropped (also when the test fails).
pub struct LoopDevice {
    /// The device node (`/dev/loop3`).
    pub device: PathBuf,
}

impl LoopDevice {
    /// A loop device over a new file of `mib` MiB in `dir`, or None (with the reason printed)
    /// where loop devices cannot be made.
    pub fn new(dir: &Path, name: &str, mib: u64) -> Option<LoopDevice> {
        Self::with_head(dir, name, mib, &[])
    }

    /// As [`LoopDevice::new`], the file starting with `head`; the kernel scans it for
    /// partitions (`losetup -P`).
    pub fn with_head(dir: &Path, name: &str, mib: u64, head: &[u8]) -> Option<LoopDevice> {
        use std::io::Write;
        let backing = dir.join(name);
        let mut file = std::fs::File::create(&backing).expect("backing file");
        file.set_len(mib << 20).expect("size the backing file");
        file.write_all(head).expect("write the head");
        drop(file);
        let output = std::process::Command::new("losetup")
            .args(["-P", "-f", "--show"])
            .arg(&backing)
            .output();
        match output {
            Ok(out) if out.status.success() => {
                let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
                Some(LoopDevice {
                    device: PathBuf::from(device),
                })
            }
            Ok(out) => {
                eprintln!(
                    "skipped: the kernel refuses a loop device here (losetup: {})",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: no losetup ({e})");
                None
            }
        }
    }

    pub fn path(&self) -> &str {
        self.device.to_str().expect("utf-8")
    }

    /// The device's name (`loop3`).
    pub fn name(&self) -> String {
        self.device
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_string()
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(&self.device)
            .status();
    }
}

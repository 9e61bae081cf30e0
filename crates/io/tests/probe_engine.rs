//! The probe engine as a library: both engines run, the mark of a probe file survives, foreign
//! files are only read, and every bad flag is refused by name before anything is created.

use std::path::Path;
use std::time::Duration;

use jetproof_io::BackendChoice;
use jetproof_io::probe::{PROBE_MAGIC, Pattern, ProbeError, ProbeSpec, run};

fn has_mark(path: &Path) -> bool {
    std::fs::read(path)
        .map(|d| d.len() >= 16 && &d[..16] == PROBE_MAGIC)
        .unwrap_or(false)
}

fn spec(dir: &Path) -> ProbeSpec {
    ProbeSpec {
        path: dir.join("probe.dat"),
        block_size: 4096,
        read_percent: 70,
        queue_depth: 4,
        duration: Duration::from_millis(200),
        pattern: Pattern::Random,
        file_size: 1 << 20,
        backend: BackendChoice::Auto,
        direct: true,
        allow_device: false,
        seed: 42,
    }
}

fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

#[test]
fn every_backend_and_pattern_runs_and_keeps_the_mark() {
    let dir = disk_dir();
    for backend in [BackendChoice::Std, BackendChoice::Auto] {
        for pattern in [Pattern::Random, Pattern::Sequential] {
            let s = ProbeSpec {
                backend,
                pattern,
                ..spec(dir.path())
            };
            let report = run(&s).expect("probe");
            assert!(report.ios > 0 && report.iops > 0.0, "{report:?}");
            assert!(report.reads.count > 0 && report.writes.count > 0);
            assert_eq!(report.reads.count + report.writes.count, report.ios);
            assert!(report.avg_latency_ms > 0.0 && report.p99_latency_ms >= report.p50_latency_ms);
            assert!(has_mark(&s.path), "the header is never overwritten");
        }
    }
}

#[test]
fn foreign_files_are_only_read() {
    let dir = disk_dir();
    let s = spec(dir.path());
    std::fs::write(&s.path, vec![5u8; 1 << 16]).expect("foreign file");
    match run(&s) {
        Err(ProbeError::BadInput { flag, message }) => {
            assert_eq!(flag, "--path");
            assert!(message.contains("--read-percent 100"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let report = run(&ProbeSpec {
        read_percent: 100,
        ..s.clone()
    })
    .expect("reading a foreign file is harmless");
    assert_eq!(report.writes.count, 0);
    assert_eq!(std::fs::read(&s.path).expect("read"), vec![5u8; 1 << 16]);
}

#[test]
fn bad_flags_name_themselves() {
    let dir = disk_dir();
    let base = spec(dir.path());
    let cases = [
        (
            ProbeSpec {
                block_size: 1000,
                ..base.clone()
            },
            "--block-size",
        ),
        (
            ProbeSpec {
                read_percent: 101,
                ..base.clone()
            },
            "--read-percent",
        ),
        (
            ProbeSpec {
                queue_depth: 0,
                ..base.clone()
            },
            "--queue-depth",
        ),
        (
            ProbeSpec {
                duration: Duration::ZERO,
                ..base.clone()
            },
            "--duration",
        ),
        (
            ProbeSpec {
                file_size: 4096,
                ..base.clone()
            },
            "--file-size",
        ),
    ];
    for (s, flag) in cases {
        match run(&s) {
            Err(ProbeError::BadInput { flag: got, .. }) => assert_eq!(got, flag),
            other => panic!("{flag}: {other:?}"),
        }
        assert!(!s.path.exists(), "{flag}: nothing was created");
    }
}

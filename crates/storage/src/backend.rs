//! The I/O backend a job reads and writes its files with (`storage.io_engine`, or
//! `--io-engine`): chosen once per command, before any I/O, and wrapped so that a database or a
//! log at a block-device path opens through the raw or log-region backend (`crate::raw`,
//! `crate::logregion`) while every other path goes straight to std or io_uring.

use std::sync::Arc;

use jetproof_io::std_backend::StdBackend;
use jetproof_io::uring::UringBackend;
use jetproof_io::{IoBackend, IoError};
use jetproof_job::{IoEngine, Job};

use crate::{BadInput, bad};

/// The I/O backend of a job (`storage.io_engine`, or `--io-engine`), opened once per command
/// and handed to the procedure, which opens every database and log file through it.
#[derive(Debug, Clone)]
pub struct SelectedBackend {
    pub backend: Arc<dyn IoBackend>,
    /// With "auto" on a kernel where io_uring is unusable: why std is used instead, for the
    /// test log.
    pub fallback: Option<String>,
}

impl SelectedBackend {
    /// The test-log line that says which engine reads and writes the files, and why when "auto"
    /// fell back.
    pub fn log_line(&self, job: &Job) -> String {
        match &self.fallback {
            Some(why) => format!(
                "I/O engine: {} (storage.io_engine = \"{}\": {why})",
                self.backend.name(),
                job.storage.io_engine
            ),
            None => format!(
                "I/O engine: {} (storage.io_engine = \"{}\")",
                self.backend.name(),
                job.storage.io_engine
            ),
        }
    }
}

/// Opens the backend the job asks for, before any I/O. An explicit "io_uring" on a kernel that
/// refuses it (sysctl `kernel.io_uring_disabled`, a seccomp filter) is bad input naming the key
/// and the fix; "auto" falls back to std and says why.
pub fn select_backend(job: &Job) -> Result<SelectedBackend, BadInput> {
    let unavailable = |error: IoError| match error {
        IoError::UringUnavailable { source } => source.to_string(),
        other => other.to_string(),
    };
    let (backend, fallback): (Arc<dyn IoBackend>, _) = match job.storage.io_engine {
        IoEngine::Std => (StdBackend::new(), None),
        IoEngine::IoUring => match UringBackend::new() {
            Ok(backend) => (backend, None),
            Err(error) => {
                return Err(bad(
                    "storage.io_engine",
                    format!(
                        "\"io_uring\" was asked for, and io_uring is not available on this kernel ({}: disabled by sysctl kernel.io_uring_disabled, or blocked by a seccomp filter in a container); set `storage.io_engine = \"std\"` in the job or pass `--io-engine std` (or \"auto\": io_uring where it works, else std)",
                        unavailable(error)
                    ),
                ));
            }
        },
        IoEngine::Auto => match UringBackend::new() {
            Ok(backend) => (backend, None),
            Err(error) => (
                StdBackend::new(),
                Some(format!(
                    "io_uring is not available on this kernel ({}), so std is used",
                    unavailable(error)
                )),
            ),
        },
    };
    // The job's databases on block devices open as files through it (`crate::raw`).
    // And its logs on block devices open as log regions (`crate::logregion`).
    let backend = crate::raw::wrap(job, crate::logregion::wrap(job, backend));
    Ok(SelectedBackend { backend, fallback })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_chooses_the_backend() {
        let mut job = Job::default();
        let std = select_backend(&job).expect("std always opens");
        assert_eq!(std.backend.name(), "std");
        assert!(std.fallback.is_none());
        assert_eq!(
            std.log_line(&job),
            "I/O engine: std (storage.io_engine = \"std\")"
        );

        job.storage.io_engine = IoEngine::Auto;
        let auto = select_backend(&job).expect("auto always opens");
        // Auto is io_uring exactly when io_uring works here; otherwise it says why not.
        let uring_works = jetproof_io::uring::UringBackend::new().is_ok();
        assert_eq!(auto.backend.name() == "io_uring", uring_works);
        assert_eq!(auto.fallback.is_some(), !uring_works);
        assert!(auto.log_line(&job).contains("storage.io_engine = \"auto\""));

        job.storage.io_engine = IoEngine::IoUring;
        match select_backend(&job) {
            Ok(uring) => {
                assert!(uring_works);
                assert_eq!(uring.backend.name(), "io_uring");
            }
            Err(error) => {
                assert!(!uring_works);
                let text = error.to_string();
                assert!(text.contains("storage.io_engine"), "{text}");
                assert!(text.contains("--io-engine std"), "{text}");
            }
        }
    }
}

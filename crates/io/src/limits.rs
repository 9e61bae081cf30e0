//! The process's open-file limit (`RLIMIT_NOFILE`).
//!
//! jetproof needs a descriptor per database and log file, and with the io_uring engine one per
//! ring: a ring per session reading at once, per file (`crate::uring`). A few hundred sessions
//! pass the usual soft limit of 1024 long before the hard limit, so every command raises its
//! soft limit to the hard limit at start, as fio and Go programs do (`raise_open_file_limit`).
//! What is left, the hard limit or the system's, gets a message naming the limit and the fix
//! (`out_of_descriptors`) instead of a bare "Too many open files" or, for a ring, the
//! misleading "io_uring is not available".

use std::path::Path;

use crate::IoError;

/// The soft and hard limits of open files, as the kernel reports them (`u64::MAX` for
/// unlimited).
pub fn open_file_limits() -> std::io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we own and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // rlim_t is u64 on every 64-bit Linux target jetproof builds for.
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Raises the soft limit of open files to the hard limit. Returns the limits before and after
/// (soft, hard). Never lowers a limit; a refusal (unlikely: raising the soft limit up to the
/// hard one needs no privilege) leaves the limits as they were and is returned.
pub fn raise_open_file_limit() -> std::io::Result<((u64, u64), (u64, u64))> {
    let before = open_file_limits()?;
    let (soft, hard) = before;
    if soft < hard {
        let limit = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((before, open_file_limits()?))
}

/// A limit as the test log shows it: a number, or "unlimited".
pub fn shown(limit: u64) -> String {
    if limit == libc::RLIM_INFINITY {
        "unlimited".to_string()
    } else {
        limit.to_string()
    }
}

/// Turns an error of making something for I/O on `path` into
/// [`IoError::OutOfFileDescriptors`] when its cause is EMFILE or ENFILE; any other error is
/// returned as it is.
pub fn out_of_descriptors(error: IoError, op: &'static str, path: &Path) -> IoError {
    let source = match error {
        IoError::UringUnavailable { source }
            if matches!(
                source.raw_os_error(),
                Some(libc::EMFILE) | Some(libc::ENFILE)
            ) =>
        {
            source
        }
        other => return other,
    };
    let limit = match open_file_limits() {
        Ok((soft, _)) => format!("{} open files", shown(soft)),
        Err(_) => "unknown".to_string(),
    };
    IoError::OutOfFileDescriptors {
        op,
        path: path.to_path_buf(),
        limit,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_leaves_the_soft_limit_at_the_hard_limit() {
        let ((_, hard_before), (soft, hard)) = raise_open_file_limit().expect("limits");
        assert_eq!(hard, hard_before, "the hard limit is never changed");
        assert_eq!(soft, hard, "the soft limit is raised to the hard limit");
    }

    #[test]
    fn only_emfile_and_enfile_become_out_of_descriptors() {
        let path = Path::new("/x/db1.jpdb");
        let emfile = IoError::UringUnavailable {
            source: std::io::Error::from_raw_os_error(libc::EMFILE),
        };
        let mapped = out_of_descriptors(emfile, "make an io_uring", path);
        assert!(
            matches!(mapped, IoError::OutOfFileDescriptors { .. }),
            "{mapped}"
        );
        let text = mapped.to_string();
        assert!(
            text.contains("/x/db1.jpdb") && text.contains("ulimit -Hn"),
            "{text}"
        );
        let other = IoError::UringUnavailable {
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        };
        let kept = out_of_descriptors(other, "make an io_uring", path);
        assert!(matches!(kept, IoError::UringUnavailable { .. }), "{kept}");
    }
}

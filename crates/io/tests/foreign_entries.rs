//! What the I/O layer promises about files jetproof did not make (issue 15, "foreign means
//! untouchable"): a new file is created only where nothing exists (`create_new`), a link is
//! never followed by a `no_follow` open, nothing but a regular file is opened that way, `exists`
//! sees a link (even a dangling one), and `rename_new` never replaces what is at its target.
//! Run against the real backends (std, io_uring) on disk, and the simulated ones where the
//! promise applies to them.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jetproof_io::fault::{FaultBackend, FaultConfig};
use jetproof_io::mem::MemBackend;
use jetproof_io::std_backend::StdBackend;
use jetproof_io::uring::UringBackend;
use jetproof_io::{IoBackend, IoClass, IoError, OpenOptions};

fn disk_dir() -> tempfile::TempDir {
    let base = std::env::var_os("JETPROOF_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    tempfile::tempdir_in(base).expect("temp dir on disk")
}

/// The backends that touch a real directory.
fn disk_backends() -> Vec<(&'static str, Arc<dyn IoBackend>)> {
    let mut backends: Vec<(&'static str, Arc<dyn IoBackend>)> = vec![("std", StdBackend::new())];
    match UringBackend::new() {
        Ok(backend) => backends.push(("io_uring", backend)),
        Err(e) => eprintln!("io_uring not tested here: {e}"),
    }
    backends
}

/// A backend, its directory, and the temporary directory that keeps it alive.
type Backend = (
    &'static str,
    Arc<dyn IoBackend>,
    PathBuf,
    Option<tempfile::TempDir>,
);

fn is_already_exists(error: &IoError) -> bool {
    matches!(error, IoError::Path { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists)
}

#[test]
fn symlink_create_new_refuses_a_link_and_writes_nothing_through_it() {
    for (name, backend) in disk_backends() {
        let tmp = disk_dir();
        let victim = tmp.path().join("victim.txt");
        std::fs::write(&victim, b"someone else's data").expect("write victim");
        let link = tmp.path().join("Enext.jplogtmp");
        symlink(&victim, &link).expect("symlink");
        let error = backend
            .open(&link, &OpenOptions::create_new().buffered())
            .expect_err(name);
        assert!(
            matches!(error, IoError::NotARegularFile { .. }),
            "{name}: {error}"
        );
        assert_eq!(
            std::fs::read(&victim).expect("read"),
            b"someone else's data"
        );
        assert!(link.symlink_metadata().is_ok(), "{name}: the link is left");

        // A dangling link: create_new must not create its target.
        let target = tmp.path().join("made-through-link");
        let dangling = tmp.path().join("checkpoint.jpchk");
        symlink(&target, &dangling).expect("symlink");
        assert!(
            backend.exists(&dangling),
            "{name}: a dangling link is an entry"
        );
        backend
            .open(&dangling, &OpenOptions::create_new().buffered())
            .expect_err(name);
        assert!(!target.exists(), "{name}: nothing created through the link");
        assert!(dangling.symlink_metadata().is_ok(), "{name}: link kept");
    }
}

#[test]
fn symlink_no_follow_open_refuses_links_fifos_and_directories() {
    for (name, backend) in disk_backends() {
        let tmp = disk_dir();
        let real = tmp.path().join("real");
        std::fs::write(&real, vec![0u8; 4096]).expect("write");
        let link = tmp.path().join("E00000001.jplog");
        symlink(&real, &link).expect("symlink");
        for options in [
            OpenOptions::read_only().buffered().no_follow(),
            OpenOptions::read_write().buffered().no_follow(),
            OpenOptions::create().buffered().no_follow(),
        ] {
            let error = backend.open(&link, &options).expect_err(name);
            assert!(
                matches!(
                    error,
                    IoError::NotARegularFile {
                        what: "a symbolic link",
                        ..
                    }
                ),
                "{name}: {error}"
            );
        }
        // Opening a FIFO would block: it is refused before the open.
        let fifo = tmp.path().join("fifo");
        let c_fifo = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("cstring");
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
        let error = backend
            .open(&fifo, &OpenOptions::read_only().buffered().no_follow())
            .expect_err(name);
        assert!(
            matches!(error, IoError::NotARegularFile { what: "a FIFO", .. }),
            "{name}: {error}"
        );
        let error = backend
            .open(tmp.path(), &OpenOptions::read_only().buffered().no_follow())
            .expect_err(name);
        assert!(
            matches!(
                error,
                IoError::NotARegularFile {
                    what: "a directory",
                    ..
                }
            ),
            "{name}: {error}"
        );
        // A regular file opens as before.
        backend
            .open(&real, &OpenOptions::read_write().buffered().no_follow())
            .expect(name);
    }
}

#[test]
fn create_new_refuses_an_existing_file_on_every_backend() {
    let mut backends: Vec<Backend> = Vec::new();
    for (name, backend) in disk_backends() {
        let tmp = disk_dir();
        backends.push((name, backend, tmp.path().to_path_buf(), Some(tmp)));
    }
    backends.push(("mem", MemBackend::new(), PathBuf::from("/mem"), None));
    backends.push((
        "fault",
        FaultBackend::new(FaultConfig::default()),
        PathBuf::from("/fault"),
        None,
    ));
    for (name, backend, dir, _tmp) in backends {
        let path = dir.join("file");
        let file = backend
            .open(&path, &OpenOptions::create_new().buffered())
            .expect(name);
        file.write_at(b"first", 0, IoClass::LogWrite).expect(name);
        drop(file);
        let error = backend
            .open(&path, &OpenOptions::create_new().buffered())
            .expect_err(name);
        assert!(is_already_exists(&error), "{name}: {error}");
        let mut back = [0u8; 5];
        backend
            .open(&path, &OpenOptions::read_only().buffered())
            .expect(name)
            .read_at(&mut back, 0, IoClass::LogRead)
            .expect(name);
        assert_eq!(&back, b"first", "{name}: the existing file is unchanged");

        // rename_new never replaces.
        let other = dir.join("other");
        backend
            .open(&other, &OpenOptions::create_new().buffered())
            .expect(name);
        let error = backend.rename_new(&other, &path).expect_err(name);
        assert!(is_already_exists(&error), "{name}: {error}");
        assert!(backend.exists(&other), "{name}: the source stays");
        let free = dir.join("free");
        backend.rename_new(&other, &free).expect(name);
        assert!(backend.exists(&free) && !backend.exists(&other), "{name}");
    }
}

#[test]
fn symlink_rename_new_refuses_a_link_at_the_target() {
    for (name, backend) in disk_backends() {
        let tmp = disk_dir();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"theirs").expect("write");
        let link = tmp.path().join("E00000002.jplog");
        symlink(Path::new("victim"), &link).expect("symlink");
        let ours = tmp.path().join("ours");
        std::fs::write(&ours, b"ours").expect("write");
        backend.rename_new(&ours, &link).expect_err(name);
        assert!(
            link.symlink_metadata()
                .expect("link")
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&victim).expect("read"), b"theirs");
    }
}

//! The results directory of one test run. Checked and created before any work starts (so a
//! late failure never finds it unwritable), and never a place where jetproof overwrites what it
//! did not write: an existing directory is accepted only when it is empty or holds nothing but
//! the files of an earlier jetproof result.

use std::path::{Path, PathBuf};

use crate::{TestKind, TestResult};

/// The files jetproof writes into a results directory (`init` holds the results of the
/// initialisation a `run` did first; `compare.*` are `jetproof compare`'s; `marks.jsonl` is the
/// control file `jetproof mark` appends to while a workload test runs).
pub const RESULT_FILES: [&str; 9] = [
    "result.json",
    "marks.jsonl",
    "samples.csv",
    "test.log",
    "report.md",
    "report.html",
    "init",
    "compare.md",
    "compare.html",
];

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutDirError {
    #[error(
        "--out {path}: the directory holds {entry:?}, which jetproof did not write; choose an empty or new directory"
    )]
    Foreign { path: PathBuf, entry: String },
    #[error(
        "--out {path}: {entry:?} there is a symbolic link, which jetproof never writes through; choose an empty or new directory"
    )]
    Link { path: PathBuf, entry: String },
    #[error(
        "--out {path}: is a symbolic link, which jetproof never writes through; give the directory it points to, or an empty or new directory"
    )]
    IsLink { path: PathBuf },
    #[error("--out {path}: exists and is not a directory; choose a directory path")]
    NotADirectory { path: PathBuf },
    #[error("--out {path}: cannot create the results directory: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `bytes` to `path` atomically and durably: into `.<name>.tmp` beside it, synced, then
/// renamed into place and the directory synced, so a reader (after a crash too) finds the old
/// file or the new one, never half of one. The one writer of every
/// document that is replaced whole (`result.json`, an aggregate's, `sweep.*`). Nothing jetproof
/// did not create is overwritten or written through: a `path` or temporary that exists as
/// anything but a regular file (a symbolic link, a directory, a device) is refused, and the
/// temporary is opened without following a link (`O_NOFOLLOW`), so a link put there between
/// the check and the open is refused too.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Some(name) = path.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file's path",
        ));
    };
    let temporary = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    for place in [path, temporary.as_path()] {
        match place.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(std::io::Error::other(format!(
                    "{} is a symbolic link, which jetproof never writes through",
                    place.display()
                )));
            }
            Ok(meta) if !meta.is_file() => {
                return Err(std::io::Error::other(format!(
                    "{} exists and is not a regular file; jetproof did not write it",
                    place.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temporary)?;
    file.write_all(bytes)?;
    // Durable before it is visible: renamed unsynced, a crash could leave the new name on an
    // empty or partial file (ext4 and XFS may commit the rename before the data), the very
    // half-file the rename is there to prevent. The directory is synced after, so the new
    // name itself survives.
    file.sync_data()?;
    drop(file);
    std::fs::rename(&temporary, path)?;
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(directory)?.sync_all()
}

/// Is `name` the temporary [`write_atomically`] writes a result file through (`.result.json.tmp`
/// and the like)? A crash between its write and its rename leaves one behind; the next run
/// replaces it (a link there is still refused).
fn is_own_temporary(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .is_some_and(|file| RESULT_FILES.contains(&file))
}

#[derive(Clone, Debug)]
pub struct OutDir {
    path: PathBuf,
}

impl OutDir {
    /// The default results directory: `./jetproof-results/<test>-<UTC timestamp>/`.
    pub fn default_path(test: TestKind) -> PathBuf {
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "")
            .trim_end_matches('Z')
            .to_string();
        PathBuf::from("./jetproof-results").join(format!("{}-{stamp}", test.name()))
    }

    /// Checks `path` (or the default for `test`) and creates it. Call before any work.
    pub fn prepare(path: Option<&Path>, test: TestKind) -> Result<OutDir, OutDirError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => Self::default_path(test),
        };
        // The directory itself a link: refused as a link at a result file's name is (issue 34).
        if path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(OutDirError::IsLink { path });
        }
        if path.exists() {
            if !path.is_dir() {
                return Err(OutDirError::NotADirectory { path });
            }
            let entries = std::fs::read_dir(&path).map_err(|source| OutDirError::Create {
                path: path.clone(),
                source,
            })?;
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if !RESULT_FILES.contains(&name.as_str()) && !is_own_temporary(&name) {
                    return Err(OutDirError::Foreign { path, entry: name });
                }
                // A writer here follows links: one at a result file's name is refused.
                if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    return Err(OutDirError::Link { path, entry: name });
                }
            }
        }
        std::fs::create_dir_all(&path).map_err(|source| OutDirError::Create {
            path: path.clone(),
            source,
        })?;
        Ok(OutDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `result.json` atomically (temporary file, then rename), so a reader never sees half
    /// a result. Called as soon as a result exists, and again when it grows.
    pub fn write_result(&self, result: &TestResult) -> Result<PathBuf, OutDirError> {
        let path = self.file("result.json");
        let text = match serde_json::to_string_pretty(result) {
            Ok(text) => text,
            Err(e) => panic!("a result always serialises: {e}"),
        };
        write_atomically(&path, (text + "\n").as_bytes()).map_err(|source| OutDirError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `report.html` (`crate::html`) from `result` and the directory's `samples.csv`,
    /// when there is one.
    pub fn write_html(&self, result: &TestResult) -> Result<PathBuf, OutDirError> {
        // Written by this run a moment ago; a file that is not there (or no longer a regular
        // file) only leaves the charts out.
        let samples = crate::read_samples_csv(&self.file("samples.csv"))
            .ok()
            .flatten();
        let path = self.file("report.html");
        // Made from the result as `result.json` reads back (serde_json's float parsing can
        // differ from the value written in the last digit), so `jetproof report` rebuilds
        // exactly this page.
        let reread = serde_json::to_string(result)
            .ok()
            .and_then(|text| serde_json::from_str::<TestResult>(&text).ok());
        let page = crate::html::report(reread.as_ref().unwrap_or(result), samples.as_deref());
        std::fs::write(&path, page).map_err(|source| OutDirError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `result.json` and the reports made from it (`report.md`, `report.html`).
    pub fn write_result_and_report(&self, result: &TestResult) -> Result<PathBuf, OutDirError> {
        let path = self.write_result(result)?;
        let report = self.file("report.md");
        std::fs::write(&report, crate::report::markdown(result)).map_err(|source| {
            OutDirError::Write {
                path: report.clone(),
                source,
            }
        })?;
        self.write_html(result)?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_new_and_accepts_own_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("r");
        OutDir::prepare(Some(&out), TestKind::Init).expect("new dir");
        std::fs::write(out.join("result.json"), "{}").expect("write");
        OutDir::prepare(Some(&out), TestKind::Init).expect("own files are fine");
    }

    /// A crash between a result's write and its rename leaves `.result.json.tmp`: the folder
    /// is still jetproof's, and the next run replaces it; any other hidden file is foreign.
    #[test]
    fn a_leftover_temporary_of_a_result_file_is_ours() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("r");
        std::fs::create_dir_all(&out).expect("mkdir");
        std::fs::write(out.join("result.json"), "{}").expect("result");
        std::fs::write(out.join(".result.json.tmp"), "{").expect("leftover");
        OutDir::prepare(Some(&out), TestKind::Performance).expect("accepted");
        std::fs::write(out.join(".notes.tmp"), "mine").expect("foreign");
        let err = OutDir::prepare(Some(&out), TestKind::Performance).expect_err("refused");
        assert!(err.to_string().contains(".notes.tmp"), "{err}");
    }

    #[test]
    fn atomic_writer_replaces_its_own_file_and_refuses_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sweep.json");
        write_atomically(&path, b"one").expect("new");
        write_atomically(&path, b"two").expect("replace");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert!(!dir.path().join(".sweep.json.tmp").exists());
        let precious = dir.path().join("precious");
        std::fs::write(&precious, "keep").expect("write");
        let linked = dir.path().join("result.json");
        std::os::unix::fs::symlink(&precious, &linked).expect("link");
        let err = write_atomically(&linked, b"x").expect_err("a link is refused");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::os::unix::fs::symlink(&precious, dir.path().join(".report.json.tmp")).expect("link");
        let err = write_atomically(&dir.path().join("report.json"), b"x")
            .expect_err("a link at the temporary is refused");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        write_atomically(&dir.path().join("sub"), b"x").expect_err("a directory is refused");
        assert_eq!(std::fs::read(&precious).expect("read"), b"keep");
    }

    #[test]
    fn refuses_foreign_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("thesis.docx"), "precious").expect("write");
        let err = OutDir::prepare(Some(dir.path()), TestKind::Init).expect_err("refused");
        assert!(err.to_string().contains("thesis.docx"), "{err}");
        assert!(err.to_string().contains("--out"), "{err}");
    }

    #[test]
    fn default_path_names_the_test() {
        let p = OutDir::default_path(TestKind::Checksum);
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        assert!(name.starts_with("checksum-20"), "{name}");
        assert!(!name.contains(':'), "{name}");
    }
}

//! The test log: one timestamped line per event, like Jetstress's (cache settings, thresholds,
//! operation mix, prerequisites, samples, shut-down). Written line by line and flushed at once, so
//! an interrupted run keeps everything up to the interruption.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

#[derive(Debug)]
pub struct TestLog {
    path: PathBuf,
    file: Mutex<File>,
    echo: bool,
}

impl TestLog {
    /// Creates (or truncates: the results directory is jetproof's own) the log at `path`.
    /// With `echo`, every line is also printed to stderr.
    pub fn create(path: &Path, echo: bool) -> std::io::Result<TestLog> {
        let file = File::create(path)?;
        Ok(TestLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            echo,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line, prefixed with the UTC time. A failure to write the log is reported on
    /// stderr once per line and does not stop the test: the log is a record, not the measurement.
    pub fn line(&self, text: impl AsRef<str>) {
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        let line = format!("{stamp} {}\n", text.as_ref());
        if self.echo {
            // Never a panic when stderr is gone (a closed terminal): the file is the record.
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
        let mut file = self.file.lock();
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|_| file.flush()) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "jetproof: cannot write the test log {}: {e}",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_timestamped_and_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("test.log");
        let log = TestLog::create(&path, false).expect("create");
        log.line("Preparing");
        log.line("Done");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].ends_with(" Preparing"), "{text}");
        assert!(lines[0].starts_with("20"), "{text}");
    }
}

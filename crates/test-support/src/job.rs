//! A small job's text, as the tests of the CLI, the procedures and the instance write by hand.

use std::path::{Path, PathBuf};

/// A small job: `databases` databases of `db_size`, buffered I/O (runs on any file system).
/// [`SmallJob::new`] gives 8 KiB pages, 1 KiB records, two sessions, a cache of 512 KiB to 1 MiB,
/// a 2 s window sampled every half second, no `data_dir` (the job's default, relative to where
/// it runs) and no `[simulation]` table; tests change fields with `..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallJob {
    /// `storage.data_dir`; `None`: not written.
    pub data_dir: Option<PathBuf>,
    pub databases: u32,
    pub db_size: String,
    pub page_size: String,
    /// `simulation.mailboxes`; `None`: no `[simulation]` table.
    pub mailboxes: Option<u32>,
    pub record_size: String,
    pub threads: u32,
    pub cache_min: String,
    pub cache_max: String,
    pub duration: String,
    pub sample_interval: String,
    /// TOML appended after the `[run]` table (more keys of `[run]`, or more tables).
    pub extra: String,
}

impl SmallJob {
    pub fn new(databases: u32, db_size: &str) -> SmallJob {
        SmallJob {
            data_dir: None,
            databases,
            db_size: db_size.to_string(),
            page_size: "8KiB".to_string(),
            mailboxes: None,
            record_size: "1KiB".to_string(),
            threads: 2,
            cache_min: "512KiB".to_string(),
            cache_max: "1MiB".to_string(),
            duration: "2s".to_string(),
            sample_interval: "500ms".to_string(),
            extra: String::new(),
        }
    }

    /// The job with its databases (and logs) in `dir`.
    pub fn in_dir(self, dir: &Path) -> SmallJob {
        SmallJob {
            data_dir: Some(dir.to_path_buf()),
            ..self
        }
    }

    /// The job file's text.
    pub fn text(&self) -> String {
        let data_dir = self
            .data_dir
            .as_ref()
            .map(|dir| format!("data_dir = \"{}\"\n", dir.display()))
            .unwrap_or_default();
        let simulation = self
            .mailboxes
            .map(|mailboxes| format!("[simulation]\nmailboxes = {mailboxes}\n"))
            .unwrap_or_default();
        format!(
            "[storage]\n{data_dir}databases = {}\ndb_size = \"{}\"\npage_size = \"{}\"\n\
             direct_io = false\n{simulation}\
             [workload]\nrecord_size = \"{}\"\nthreads = {}\n\
             [cache]\nmin_size = \"{}\"\nmax_size = \"{}\"\n\
             [run]\nduration = \"{}\"\nsample_interval = \"{}\"\n{}",
            self.databases,
            self.db_size,
            self.page_size,
            self.record_size,
            self.threads,
            self.cache_min,
            self.cache_max,
            self.duration,
            self.sample_interval,
            self.extra
        )
    }

    /// Writes [`SmallJob::text`] to `path`; gives `path`.
    pub fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.text())
            .unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
        path.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_has_every_table_in_order() {
        assert_eq!(
            SmallJob::new(2, "8MiB").text(),
            "[storage]\ndatabases = 2\ndb_size = \"8MiB\"\npage_size = \"8KiB\"\ndirect_io = false\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 2\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"2s\"\nsample_interval = \"500ms\"\n"
        );
        let job = SmallJob {
            mailboxes: Some(10),
            threads: 1,
            extra: "[thresholds]\ndb_read_avg_ms = 11\n".to_string(),
            ..SmallJob::new(1, "4MiB").in_dir(Path::new("/tmp/x/data"))
        };
        assert_eq!(
            job.text(),
            "[storage]\ndata_dir = \"/tmp/x/data\"\ndatabases = 1\ndb_size = \"4MiB\"\n\
             page_size = \"8KiB\"\ndirect_io = false\n[simulation]\nmailboxes = 10\n\
             [workload]\nrecord_size = \"1KiB\"\nthreads = 1\n\
             [cache]\nmin_size = \"512KiB\"\nmax_size = \"1MiB\"\n\
             [run]\nduration = \"2s\"\nsample_interval = \"500ms\"\n\
             [thresholds]\ndb_read_avg_ms = 11\n"
        );
    }
}

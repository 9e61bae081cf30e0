//! jetproof's test procedures: each test type is a procedure over the engine and the I/O layer.
//! They know nothing of the command line: they take a validated job and report through
//! `jetproof_results`.

pub mod autotune;
pub mod backup;
pub mod checksum;
pub mod device_view;
pub mod init;
pub mod live;
pub mod maintenance;
pub mod options;
pub mod page_content;
pub mod performance;
pub mod reduction;
pub mod replication;
pub mod run;
pub mod sequence;
pub mod settings;
pub mod soft_recovery;
pub mod start;
pub mod store;
pub mod sweep;
pub mod test_hooks;

//! One file per command: its flags (`Args`) and `run`, which calls into the libraries.

pub mod aggregate;
pub mod checksum;
pub mod compare;
pub mod esrp;
pub mod init;
pub mod job;
pub mod mark;
pub mod plan;
pub mod probe;
pub mod recover;
pub mod report;
pub mod run;
pub mod sweep;

//! jetproof's test procedures: each test type is a procedure over the engine and the I/O layer.
//! They know nothing of the command line: they take a validated job and report through
//! `jetproof_results`.

pub mod backup;
pub mod checksum;
pub mod database;
pub mod init;
pub mod target;

/// The key of the `n`th record a database was filled with: big-endian, so that keys sort in
/// insertion order and the workload can address any record by number.
pub fn workload_key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

//! The engine as the workload and the tests see it: the store adapter of a database instance,
//! and the check that a database was shut down cleanly before it is attached.

use std::sync::Arc;

use jetproof_engine::{DbHeader, DbState};
use jetproof_instance::{Instance as LoggedInstance, InstanceError};
use jetproof_io::{IoBackend, OpenOptions};
use jetproof_job::Job;
use jetproof_workload::store::{Store, StoreError};

use crate::run::RunError;
use jetproof_storage::bad;

/// The engine as the workload sees it: a database instance (database + log). Each session is a
/// thread, and the instance keeps each thread's current transaction.
pub(crate) struct EngineStore(pub(crate) Arc<LoggedInstance>);

impl EngineStore {
    /// A write conflict (another session's open transaction changed the key; ESE's
    /// `JET_errWriteConflict`) is not a storage error: the transaction is rolled back, counted in
    /// the instance's `write_conflicts`, and the operation counts as finding nothing.
    fn write(&self, result: Result<bool, InstanceError>) -> Result<bool, StoreError> {
        match result {
            Err(InstanceError::WriteConflict { .. }) => {
                self.0.rollback()?;
                Ok(false)
            }
            other => Ok(other?),
        }
    }
}

impl Store for EngineStore {
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, StoreError> {
        self.write(self.0.insert(key, value))
    }
    fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool, StoreError> {
        self.write(self.0.replace(key, value))
    }
    fn delete(&self, key: &[u8]) -> Result<bool, StoreError> {
        self.write(self.0.delete(key))
    }
    fn read(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.0.get(key)?.is_some())
    }
    fn first_at_or_after(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.0.scan(key, 1)?.into_iter().next().map(|(k, _)| k))
    }
    fn commit(&self, lazy: bool) -> Result<(), StoreError> {
        // A durable commit waits for its commit record to be on stable storage (group commit
        // shares the log write); a lazy one is made durable by the log's flusher within ms.
        self.0.commit(lazy)?;
        Ok(())
    }
}

/// Refuses a database that was not shut down cleanly (read-only: its header only), saying how
/// to go on. Every test that attaches databases checks all of them first.
pub(crate) fn require_clean(
    job: &Job,
    backend: &dyn IoBackend,
    instance: &jetproof_job::Instance,
) -> Result<(), RunError> {
    let file = backend.open(
        &instance.database_path,
        &OpenOptions::read_only().with_direct(job.storage.direct_io),
    )?;
    let header = DbHeader::read(file.as_ref()).map_err(|e| RunError::Results(e.to_string()))?;
    if header.state != DbState::Clean {
        return Err(bad(
            format!("database of {}", instance.name),
            format!(
                "{} was not shut down cleanly and needs recovery from its logs; run `jetproof recover` first",
                instance.database_path.display()
            ),
        )
        .into());
    }
    Ok(())
}

//! What the workload needs of a database, as a trait: the engine implements it (through an
//! adapter in the procedures), and the workload's own tests use an in-memory model. Keeping the
//! workload behind this trait is what lets it be tested without a disk, and keeps it free of
//! engine internals.

pub type StoreError = Box<dyn std::error::Error + Send + Sync>;

pub trait Store: Send + Sync {
    /// Adds a record; false if the key existed.
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, StoreError>;
    /// Rewrites a record; false if the key does not exist.
    fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool, StoreError>;
    /// Removes a record; false if the key does not exist.
    fn delete(&self, key: &[u8]) -> Result<bool, StoreError>;
    /// Reads a record (its value is looked at and dropped); false if the key does not exist.
    fn read(&self, key: &[u8]) -> Result<bool, StoreError>;
    /// The first key at or after `key`, if any.
    fn first_at_or_after(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Ends the session's current transaction. A lazy commit does not wait for the log to be
    /// durable; a durable one does.
    fn commit(&self, lazy: bool) -> Result<(), StoreError>;
}

//! jetproof's workload: what sessions do to the databases, and in what shape.
//!
//! * [`content`]: record content of a stated compressibility, never repeating a block.
//! * [`keys`]: records are mail items, keyed by (mailbox, item number), so that new items land in
//!   many places of the tree (each mailbox's tail) rather than at one end, as in a mail database.
//! * [`mix`]: the operation mix (insert/delete/replace/read, default 40/20/5/35) and the share of
//!   lazy commits.
//! * [`mailboxes`]: each mailbox's item range, found from the data at attach time.
//! * [`pacer`]: spreading transactions evenly to reach a target rate.
//! * [`session`]: the transaction loop of one session (thread).
//! * [`store`]: what the workload needs of a database, as a trait.
pub mod content;
pub mod keys;
pub mod mailboxes;
pub mod mix;
pub mod pacer;
pub mod session;
pub mod store;

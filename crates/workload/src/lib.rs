//! jetproof's workload: what sessions do to the databases, and in what shape.
//!
//! * [`keys`]: records are mail items, keyed by (mailbox, item number), so that new items land in
//!   many places of the tree (each mailbox's tail) rather than at one end, as in a mail database.
//! * [`mix`]: the operation mix (insert/delete/replace/read, default 40/20/5/35) and the share of
//!   lazy commits.
pub mod keys;
pub mod mix;

//! jetproof's storage targets: where the databases and logs of a job live and what jetproof may
//! do there, below the procedures that run tests on them and above the I/O layer.
//!
//! - [`error`]: [`BadInput`], what every check here returns;
//! - [`target`]: directories and files jetproof may touch (markers, foreign files, `.partial`
//!   files and their naming rule);
//! - [`database`]: recognising a database file, "run init first", lost databases;
//! - [`device`]: block devices at database or log paths, checked before any I/O;
//! - [`raw`] and [`logregion`]: the backends that lay a database, and a log, on a device;
//! - [`lock`]: the owner lock that keeps two commands off one target;
//! - [`host`]: whether the job fits this host (threads, memory, space, devices);
//! - [`backend`]: the I/O backend a job asks for, wrapped for its devices.
//!
//! It stands on `io`, `job`, and the engine's and the log's file headers (to recognise their
//! files); it imports no procedure (`docs/README.md`, "The crates, bottom to top").

pub mod backend;
pub mod database;
pub mod device;
pub mod error;
pub mod host;
pub mod lock;
pub mod logregion;
pub mod marks;
pub mod raw;
pub mod target;

pub use error::{BadInput, bad};

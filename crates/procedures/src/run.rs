//! What every run of a workload (performance, stress, soft recovery) takes and how it fails.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use jetproof_engine::EngineError;
use jetproof_instance::InstanceError;
use jetproof_io::{IoBackend, IoError};

use jetproof_storage::BadInput;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(transparent)]
    BadInput(#[from] BadInput),
    #[error("{0}")]
    Io(#[from] IoError),
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Instance(#[from] InstanceError),
    #[error("{0}")]
    Results(String),
}

pub struct RunOptions<'a> {
    pub backend: Arc<dyn IoBackend>,
    /// Set by Ctrl-C: the run ends early, keeps what it measured and marks it interrupted.
    pub stop: &'a AtomicBool,
    /// Seed of the sessions' random choices.
    pub seed: u64,
    /// `--start-at`: the measured part starts at this moment of the host's clock, after
    /// everything before it (`crate::start`). None: as soon as the preparation is done.
    pub start_at: Option<SystemTime>,
    /// Told each sample of the measured window (`crate::live`); None: nobody watches.
    pub live: Option<&'a dyn crate::live::LiveView>,
}

//! The storage layer's error: input that cannot be used, found before any I/O (a path that is
//! foreign, a device that is mounted, a job that does not fit this host). Every check of this
//! crate returns it; the CLI turns it into exit 2 with the message, and a procedure carries it
//! inside its own error (`jetproof_procedures::init::InitError::BadInput`, ...).

/// Input that cannot be used, found before any I/O. Names the field or flag and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BadInput {
    pub field: String,
    pub message: String,
}

/// A [`BadInput`] naming `field` (a job key such as `storage.allow_devices`, or a flag such as
/// `--to`) and `message` (what was found and the fix).
pub fn bad(field: impl Into<String>, message: impl Into<String>) -> BadInput {
    BadInput {
        field: field.into(),
        message: message.into(),
    }
}

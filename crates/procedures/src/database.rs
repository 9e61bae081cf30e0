//! The bridge between procedures and the engine's database files: recognising one, and the
//! naming of files a procedure creates.

use jetproof_engine::header::SIGNATURE;

/// Offset of the signature in a header page (see `crates/engine/src/header.rs`).
const SIGNATURE_OFFSET: usize = 80;

/// Does this first block of a file carry a jetproof database signature? A cheap test used before
/// any write, to tell jetproof's own databases from foreign files.
pub fn looks_like_database(head: &[u8]) -> bool {
    head.get(SIGNATURE_OFFSET..SIGNATURE_OFFSET + SIGNATURE.len()) == Some(&SIGNATURE[..])
}

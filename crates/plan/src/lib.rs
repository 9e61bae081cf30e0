//! Sizing arithmetic (issue 6). Not built yet.

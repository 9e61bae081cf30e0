//! jetproof's write-ahead log (issue 3): one stream per database instance, written sequentially
//! into numbered generation files from a log buffer, with lazy and durable commits, group commit
//! and a checkpoint file. Not built yet.

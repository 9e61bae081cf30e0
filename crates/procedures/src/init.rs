//! The init procedure: create the databases and fill them. Not built yet.

//! The checksum test: verify every page of every database and log file. Not built yet.

//! `result.json`: the versioned result of one test run (SPEC §5). Every report is made from it.

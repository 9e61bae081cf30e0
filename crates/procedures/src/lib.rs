//! jetproof's test procedures: each test type is a procedure over the engine and the I/O layer.

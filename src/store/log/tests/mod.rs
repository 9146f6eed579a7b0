//! Black-box tests of the log engine.

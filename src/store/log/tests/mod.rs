//! Black-box tests of the log engine over real files in temporary directories: semantics
//! across reopen, torn tails, corruption, segment life, group commit and write failures.

mod bench;
mod corruption;
mod faults;
mod group_commit;
mod model;
mod preallocate;
mod reopen;
mod segments;
mod support;
mod torn_tail;

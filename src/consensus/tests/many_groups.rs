//! Many groups sharing one log engine: all proposals succeed, and group commit shares fsyncs.

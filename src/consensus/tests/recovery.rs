//! Snapshots, purging, and recovery when sled is behind.

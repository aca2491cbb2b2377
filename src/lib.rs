//! jitterwatch: who steals each isolated CPU, and for how long.
pub mod cpulist;
pub mod sanitize;
pub mod bpf;
pub mod events;
pub mod kallsyms;
pub mod names;
pub mod timeline;
pub mod cause;
pub mod attribution;
pub mod duration;
pub mod probe;
pub mod sys;
pub mod stats;
pub mod export;
pub mod summary;

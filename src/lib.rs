//! jitterwatch: who steals each isolated CPU, and for how long.
pub mod cpulist;
pub mod sanitize;

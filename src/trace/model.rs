//! A trace as jitterwatch draws it, before any file format: tracks, slices
//! on them, instants, and flow arrows between them. Names are already
//! escaped for a screen (`sanitize`); each writer escapes them again for
//! its format. Times are CLOCK_MONOTONIC ns, as in the CSV.

/// A value attached to a slice: what Perfetto calls a debug annotation.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Uint(u64),
    Str(String),
    /// A list of records, each a list of named values (a stall's causes).
    List(Vec<Vec<Arg>>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: &'static str,
    pub value: Value,
}

impl Arg {
    pub fn uint(name: &'static str, v: u64) -> Self {
        Arg { name, value: Value::Uint(v) }
    }

    pub fn str(name: &'static str, v: impl Into<String>) -> Self {
        Arg { name, value: Value::Str(v.into()) }
    }
}

/// What a track groups under in a viewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// Top level (a CPU, a probe).
    None,
    /// A process (its tgid and name): its threads' tracks nest under it.
    Process { pid: u32, name: String },
    /// A track under another one (a thread on a CPU under its process).
    Child(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// Unique in the trace; never 0 (Perfetto's implicit global track).
    pub uuid: u64,
    pub name: String,
    pub group: Group,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub track: u64,
    pub start: u64,
    pub end: u64,
    /// Nesting depth on its track (0 outermost): orders slices that begin
    /// or end at the same instant.
    pub depth: u8,
    pub name: String,
    /// The cause kind (`task`, `irq`...), or `stall`.
    pub category: &'static str,
    pub args: Vec<Arg>,
    /// A flow arrow ends here (the send that caused this slice).
    pub flow_in: Option<u64>,
}

/// A point in time on a track: a lost-events mark, a send that starts a
/// flow arrow (`flow_out`).
#[derive(Debug, Clone, PartialEq)]
pub struct Instant {
    pub track: u64,
    pub ts: u64,
    pub name: String,
    pub category: &'static str,
    pub args: Vec<Arg>,
    pub flow_out: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub tracks: Vec<Track>,
    pub slices: Vec<Slice>,
    pub instants: Vec<Instant>,
    /// CLOCK_MONOTONIC and CLOCK_BOOTTIME read at one instant, so a
    /// viewer can place the trace's times (its default clock is boottime).
    pub clocks: Option<(u64, u64)>,
    /// What the trace covers, `[from, to)`.
    pub from: u64,
    pub to: u64,
}

impl Trace {
    /// The track named `name` in `group`, added if new.
    pub fn track(&mut self, name: &str, group: Group) -> u64 {
        if let Some(t) = self.tracks.iter().find(|t| t.name == name && t.group == group) {
            return t.uuid;
        }
        let uuid = self.tracks.len() as u64 + 1;
        self.tracks.push(Track { uuid, name: name.to_string(), group });
        uuid
    }
}

/// CLOCK_MONOTONIC and CLOCK_BOOTTIME now, for `Trace::clocks`.
pub fn clocks_now() -> (u64, u64) {
    let read = |id| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(id, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    (read(libc::CLOCK_MONOTONIC), read(libc::CLOCK_BOOTTIME))
}

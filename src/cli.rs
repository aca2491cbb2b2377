//! The command line (docs/ARCHITECTURE.md, Contracts): watch by default,
//! `events` to see the decoded stream, `doctor` for the isolation audit.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[cfg(test)]
mod help_tests;

/// The headings `--help` and the man page group the watch options under,
/// by what a user is deciding (docs/usage.md says why these). Every watch
/// option has one; help_tests.rs fails on an option without.
pub mod heading {
    pub const WATCH: &str = "Watch";
    pub const PROBE: &str = "Probe";
    pub const OUTPUT: &str = "Output";
    pub const PASSIVE: &str = "Passive mode";
    pub const ORIGINS: &str = "Origins";
    pub const FLEET: &str = "Fleet";
    pub const RECORDING: &str = "Recording";
    /// In the order --help shows them (that of each heading's first option).
    #[cfg(test)]
    pub const ALL: [&str; 7] = [WATCH, PROBE, OUTPUT, PASSIVE, ORIGINS, FLEET, RECORDING];
}

#[derive(Debug, Parser)]
#[command(name = "jitterwatch", version, about = "Who steals each isolated CPU, and for how long: live.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub watch: WatchArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeArg {
    /// Read the clock in a tight loop: every gap is time taken from the CPU
    Spin,
    /// Sleep to a deadline every --period: how late the thread wakes, as cyclictest measures
    Wakeup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoopClockArg {
    /// The CPU's counter where usable, else vdso (the default)
    Auto,
    /// clock_gettime(CLOCK_MONOTONIC), through the vDSO
    Vdso,
    /// x86_64's time-stamp counter
    Tsc,
    /// arm64's virtual counter (CNTVCT_EL0)
    Cntvct,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SwitchHookArg {
    /// tp_btf/sched_switch: a program on every CPU's switches, the cheapest on the watched CPUs (the default)
    Tracepoint,
    /// A software context-switch perf event per watched CPU: unwatched CPUs never enter BPF, the watched pay more a switch (probe modes; kernels with CONFIG_FAIR_GROUP_SCHED, Linux 5.11+)
    PerfEvent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EventsFormat {
    /// One line per event, like perf script
    Text,
    /// Perfetto's protobuf trace
    Perfetto,
    /// Chrome's trace-event JSON
    Json,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// CPUs to watch, as a kernel cpulist (6,7 or 2-5,8); default: the isolated CPUs
    #[arg(help_heading = heading::WATCH)]
    #[arg(long)]
    pub cpus: Option<String>,
    /// Smallest gap reported, e.g. 500ns, 2us; default: max(1us, 8 × the spin probe's loop floor); auto: 8 × that floor, sub-µs gaps too (the wake-up probe and passive mode keep their own defaults)
    #[arg(help_heading = heading::WATCH)]
    #[arg(long, value_name = "DUR|auto", value_parser = crate::probe::threshold::parse)]
    pub threshold: Option<crate::probe::Threshold>,
    /// Stop after this long, e.g. 10s, 5m (100ms at least)
    #[arg(help_heading = heading::WATCH)]
    #[arg(long, value_parser = crate::duration::run_length)]
    pub duration: Option<Duration>,
    /// Run the probes SCHED_FIFO, at PRIO (1-99, default 50)
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_name = "PRIO", num_args = 0..=1, default_missing_value = "50",
          value_parser = clap::value_parser!(i32).range(1..=99))]
    pub rt: Option<i32>,
    /// The probe on each CPU: spin (a tight clock loop) or wakeup (sleeps to a deadline every --period)
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_enum, default_value_t = ProbeArg::Spin, conflicts_with_all = ["pid", "tid", "comm"])]
    pub probe: ProbeArg,
    /// The wake-up probe's period, 10us to 10s (default 1ms)
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_name = "DUR", value_parser = crate::duration::period_ns)]
    pub period: Option<u64>,
    /// The wake-up probe's timer slack (PR_SET_TIMERSLACK), e.g. 1ns; default: the thread's (50us for SCHED_OTHER, 0 under --rt)
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_name = "DUR", value_parser = crate::duration::parse_ns)]
    pub timer_slack: Option<u64>,
    /// Hold /dev/cpu_dma_latency at US microseconds (0 to 1999999999) for the run, as cyclictest does (at 0) by default: no CPU enters an idle state slower to leave; default: not held, the machine as configured
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_name = "US", value_parser = crate::dma_latency::parse)]
    pub dma_latency: Option<u32>,
    /// The probe loop's clock: the CPU's counter (tsc on x86_64, cntvct on arm64; calibrated against CLOCK_MONOTONIC), vdso (clock_gettime), or auto: the counter where it is the kernel's clocksource (and, a TSC, invariant), else vdso
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_enum, default_value_t = LoopClockArg::Auto)]
    pub clock: LoopClockArg,
    /// How context switches reach jitterwatch: tracepoint (a program on every CPU's switches, the cheapest on the watched CPUs) or perf-event (only the watched CPUs' switches, each costing them more; not in passive mode, which needs the switches out of idle the event misses)
    #[arg(help_heading = heading::PROBE)]
    #[arg(long, value_enum, value_name = "HOOK", default_value_t = SwitchHookArg::Tracepoint, conflicts_with_all = ["pid", "tid", "comm"])]
    pub switch_hook: SwitchHookArg,
    /// Write one row per hiccup to this CSV file
    #[arg(help_heading = heading::OUTPUT)]
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Passive mode: also a CSV row for each softirq the watched thread's own system call ran (its own work, not a hiccup; by default only their totals, in the summary)
    #[arg(help_heading = heading::OUTPUT)]
    #[arg(long, requires = "csv")]
    pub csv_in_syscall: bool,
    /// Write the run's summary as JSON to this file (default with --csv: beside it, as NAME.summary.json, for `compare`)
    #[arg(help_heading = heading::OUTPUT)]
    #[arg(long, value_name = "PATH")]
    pub summary_json: Option<PathBuf>,
    /// No live screen: print the summary at exit (automatic when stdout is not a terminal)
    #[arg(help_heading = heading::OUTPUT)]
    #[arg(long)]
    pub no_tui: bool,
    /// Print the exit summary as JSON
    #[arg(help_heading = heading::OUTPUT)]
    #[arg(long)]
    pub json: bool,
    /// Enable kernel BPF run-time statistics and show each program's ns/event
    #[arg(help_heading = heading::OUTPUT)]
    #[arg(long)]
    pub bpf_stats: bool,
    /// Passive mode, no probe: watch every thread of these processes (threads they start later too)
    #[arg(help_heading = heading::PASSIVE)]
    #[arg(long, value_name = "PID,...", value_delimiter = ',', conflicts_with = "rt")]
    pub pid: Vec<u32>,
    /// Passive mode, no probe: watch these threads
    #[arg(help_heading = heading::PASSIVE)]
    #[arg(long, value_name = "TID,...", value_delimiter = ',', conflicts_with = "rt")]
    pub tid: Vec<u32>,
    /// Passive mode, no probe: watch threads with this name (its first 15 bytes, as the kernel keeps it)
    #[arg(help_heading = heading::PASSIVE)]
    #[arg(long, value_name = "NAME", conflicts_with = "rt")]
    pub comm: Option<std::ffi::OsString>,
    /// Do not trace who sends IPIs or queues work onto the watched CPUs (the `origins` column stays empty)
    #[arg(help_heading = heading::ORIGINS)]
    #[arg(long)]
    pub no_origins: bool,
    /// Also trace who wakes each task on the watched CPUs: a BPF program on every wake-up of every CPU (about 1% of a housekeeping CPU doing 130k wake-ups a second)
    #[arg(help_heading = heading::ORIGINS)]
    #[arg(long, conflicts_with = "no_origins")]
    pub wake_origins: bool,
    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR/metrics, e.g. 127.0.0.1:9464 or localhost:9464 (any other address than loopback shows process and thread names to whoever reaches it)
    #[arg(help_heading = heading::FLEET)]
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<String>,
    /// Causes per CPU (and watched threads) with a series of their own on /metrics; the rest are (others) of their kind
    #[arg(help_heading = heading::FLEET)]
    #[arg(long, value_name = "K", default_value_t = crate::metrics::DEFAULT_TOP, requires = "prometheus",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub prometheus_top: u16,
    /// After the run, keep serving its final figures this long, so that a --duration run's end is scraped
    #[arg(help_heading = heading::FLEET)]
    #[arg(long, value_name = "DUR", requires = "prometheus", value_parser = crate::duration::positive)]
    pub prometheus_linger: Option<Duration>,
    /// Flight recorder: write a trace (Perfetto opens it) around each stall at or above --trace-above into DIR
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
    /// How long before a traced stall its trace begins: each CPU keeps this much of its events, up to 10s [default: 50ms]
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_name = "DUR", requires = "trace_dir", value_parser = crate::duration::positive_ns)]
    pub trace_keep: Option<u64>,
    /// Stalls at or above this get a trace [default: 10 × the threshold]
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_name = "DUR", requires = "trace_dir", value_parser = crate::duration::positive_ns)]
    pub trace_above: Option<u64>,
    /// Traces written per minute at most; the stalls left out are counted
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_name = "N", requires = "trace_dir", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub trace_max: u32,
    /// The format of --trace-dir's and --record's traces: perfetto (protobuf) or json (Chrome trace-event, for tools that read only that)
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_enum, default_value_t = crate::trace::Format::Perfetto)]
    pub trace_format: crate::trace::Format,
    /// Stop at the first stall at or over DUR, after writing its trace (with --trace-dir) and the summary; exit status 3
    #[arg(help_heading = heading::WATCH)]
    #[arg(long, value_name = "DUR", value_parser = crate::duration::positive_ns)]
    pub stop_above: Option<u64>,
    /// Stalls at or over DUR whose largest cause is a task that ran DUR or more in one go carry that task's kernel stack as it left the CPU (the CSV's stack column, the summary, the screen's stall on Enter, traces); off by default: each such run costs one kernel stack walk
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_name = "DUR", value_parser = crate::duration::positive_ns)]
    pub stacks_above: Option<u64>,
    /// Run to the end, then exit with status 3 if any stall was at or over DUR (the summary names the worst): a CI gate
    #[arg(help_heading = heading::WATCH)]
    #[arg(long, value_name = "DUR", value_parser = crate::duration::positive_ns)]
    pub fail_above: Option<u64>,
    /// Run CMD (with /bin/sh -c) at each stall at or over --fail-above, else --stop-above, else the threshold, with the stall's fields in JW_* variables; one at a time, at most one a second, never blocking the measuring
    #[arg(help_heading = heading::WATCH)]
    #[arg(long, value_name = "CMD")]
    pub on_stall: Option<String>,
    /// Record the whole run as one trace into FILE (for short runs: at most 256 MiB of events; the trace and the summary say where it was cut)
    #[arg(help_heading = heading::RECORDING)]
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

impl WatchArgs {
    /// Passive mode was asked for: which threads to watch.
    pub fn passive_filter(&self) -> Option<crate::passive::Filter> {
        use std::os::unix::ffi::OsStrExt;
        if self.pid.is_empty() && self.tid.is_empty() && self.comm.is_none() {
            return None;
        }
        let comm = self.comm.as_ref().map(|c| {
            let b = c.as_bytes();
            b[..b.len().min(crate::record::COMM_LEN - 1)].to_vec()
        });
        Some(crate::passive::Filter { tgids: self.pid.clone(), tids: self.tid.clone(), comm })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print every decoded kernel event on the watched CPUs, like perf script
    Events {
        /// CPUs to trace, as a kernel cpulist
        #[arg(long)]
        cpus: Option<String>,
        /// Stop after this long, e.g. 3s
        #[arg(long, value_parser = crate::duration::positive)]
        duration: Option<Duration>,
        /// text: one line per event on stdout; perfetto or json: the events as one trace into FILE
        #[arg(long, value_enum, default_value_t = EventsFormat::Text)]
        format: EventsFormat,
        /// Where --format perfetto or json writes the trace
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Compare runs: the table of gap percentiles per run, the causes that appeared, vanished, grew or shrank, and a chart
    Compare {
        /// The base run, then the others: each a CSV jitterwatch wrote (its NAME.summary.json beside it) or that summary
        #[arg(required = true, num_args = 2.., value_name = "RUN")]
        runs: Vec<PathBuf>,
        #[command(flatten)]
        out: ReportArgs,
    },
    /// One run's table and chart, as compare draws them
    Report {
        /// A CSV jitterwatch wrote (its NAME.summary.json beside it) or that summary
        #[arg(value_name = "RUN")]
        run: PathBuf,
        #[command(flatten)]
        out: ReportArgs,
    },
    /// Which stalls made each slow operation slow: an application's log of its operations against runs' CSVs
    Explain {
        /// The application's log: sockperf's --full-log, or a CSV whose columns --start/--end/--latency name
        #[arg(value_name = "OPS")]
        ops: PathBuf,
        /// Runs' CSVs (each NAME.summary.json beside it): one, or one per end of the load
        #[arg(required = true, value_name = "RUN")]
        runs: Vec<PathBuf>,
        #[command(flatten)]
        how: ExplainArgs,
    },
    /// Replay synthetic event streams of N CPUs through the consumer (for cargo xtask bench)
    #[command(hide = true)]
    ReplayBench {
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        cpus: u32,
        /// Events to replay, about
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
    },
    /// Run as a service: headless, until stopped (SIGTERM, SIGINT, SIGQUIT, or SIGHUP unless started with it ignored, as nohup does), logging a line per CPU every minute; with --prometheus for a fleet
    Serve {
        #[command(flatten)]
        watch: Box<WatchArgs>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from these definitions
    #[command(hide = true)]
    Manpage,
    /// Audit the isolation of the watched CPUs and print the fixes
    Doctor {
        /// CPUs to audit, as a kernel cpulist
        #[arg(long)]
        cpus: Option<String>,
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Only this CPU (default: all CPUs together, then each)
    #[arg(long)]
    pub cpu: Option<u32>,
    /// The runs' names, in order (default: the file names)
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
    /// Draw the chart as SVG to this file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Draw the chart as PNG to this file
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    /// Print the comparison as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The column of OPS (a header name, or a number from 1) with each operation's start
    #[arg(long, value_name = "COL")]
    pub start: Option<String>,
    /// The column with each operation's end
    #[arg(long, value_name = "COL")]
    pub end: Option<String>,
    /// The column with each operation's latency (with --start or --end)
    #[arg(long, value_name = "COL")]
    pub latency: Option<String>,
    /// The unit of those columns (default ns)
    #[arg(long, value_enum)]
    pub unit: Option<crate::explain::ops::Unit>,
    /// The clock OPS's times are on
    #[arg(long, value_enum, default_value_t = crate::explain::LogClock::Monotonic)]
    pub clock: crate::explain::LogClock,
    /// Slow: at or over this latency, e.g. 1ms (default: the slowest 1% of the operations inside the runs)
    #[arg(long, value_name = "DUR", value_parser = crate::duration::parse_ns)]
    pub above: Option<u64>,
    /// How many of the slowest operations the text lists with their stalls (--json lists all)
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Print the answer as JSON
    #[arg(long)]
    pub json: bool,
    /// Draw the chart as SVG to this file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Draw the chart as PNG to this file
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
}

impl ExplainArgs {
    pub fn options(self, ops: PathBuf, runs: Vec<PathBuf>) -> crate::explain::Options {
        crate::explain::Options {
            ops,
            runs,
            columns: crate::explain::ops::Columns { start: self.start, end: self.end, latency: self.latency, unit: self.unit },
            clock: self.clock,
            above_ns: self.above,
            top: self.top,
            json: self.json,
            svg: self.svg,
            png: self.png,
        }
    }
}

impl ReportArgs {
    pub fn options(self, inputs: Vec<PathBuf>) -> crate::compare::Options {
        crate::compare::Options { inputs, labels: self.label, cpu: self.cpu, svg: self.svg, png: self.png, json: self.json }
    }
}

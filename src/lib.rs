//! jitterwatch: who steals each isolated CPU, and for how long.
//!
//! Sources (the probes, passive mode) produce intervals, the engine
//! explains them from the kernel's events, sinks (aggregates, CSV,
//! metrics, traces) consume the explained intervals: docs/ARCHITECTURE.md
//! draws the layers and the way of one event.
//! Modules are private: the binary calls `main`; the integration tests use
//! the few public ones below.

mod bpf;
mod caps;
mod cause;
mod checks;
mod cli;
mod collector;
mod compare;
mod cpulock;
mod dma_latency;
mod doctor;
mod duration;
mod engine;
mod event_lines;
mod events_cmd;
mod explain;
mod export;
mod fastmap;
mod interval;
mod kallsyms;
mod lifecycle;
mod loop_clock;
mod manpage;
mod metrics;
mod mode;
mod monitor;
mod names;
mod on_stall;
mod outcome;
mod output;
mod passive;
mod probe;
mod procfs;
mod record;
mod replay;
mod sanitize;
mod say;
mod serve;
mod sink;
mod slots;
mod snapshot;
mod source;
mod sources;
mod startup;
mod stats;
mod summary;
mod tick;
mod trace;
mod tui;
mod units;

pub mod clock;
pub mod cpulist;
pub mod perfetto_proto;
/// The README's pictures, for `cargo xtask screenshots` (examples/screenshots.rs).
#[doc(hidden)]
pub mod screenshots;
pub mod sys;

use say::say;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

use cli::{Cli, Command};

/// The whole program: parse, dispatch, and turn the outcome into one line
/// and an exit status.
pub fn main() -> ExitCode {
    lifecycle::mark_main_start();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            // One line, like every other error, not clap's three.
            let msg = e.to_string();
            // The arguments a message lists on lines of their own (what was
            // required, and not given) join it.
            let listed: Vec<&str> = msg.lines().skip(1).take_while(|l| !l.is_empty()).map(str::trim).collect();
            let first = match msg.lines().next().unwrap_or_default() {
                f if f.ends_with(':') && !listed.is_empty() => format!("{f} {}", listed.join(", ")),
                f => f.to_string(),
            };
            // An enum's values are on a line of their own: keep them.
            let values = msg.lines().find_map(|l| l.trim().strip_prefix("[possible values: ")).map(|v| v.trim_end_matches(']'));
            match values {
                Some(v) => say!("{}: give one of {v} (see --help)", first.trim_start_matches("error: ")),
                None => say!("{} (see --help)", first.trim_start_matches("error: ")),
            }
            return ExitCode::from(2);
        }
    };
    lifecycle::install_panic_hook();
    // Handlers only where a run is live (the watch, serve, events): there a
    // signal asks for the orderly end (the CSV flushed, the programs
    // detached, the terminal restored). Elsewhere nothing reads the stop
    // flag, and a handler would leave compare or doctor deaf to Ctrl-C.
    let live = matches!(cli.command, None | Some(Command::Serve { .. } | Command::Events { .. }));
    if live {
        if let Err(e) = lifecycle::install_signal_handlers() {
            say!("cannot install signal handlers: {e}");
            return ExitCode::from(2);
        }
    }
    let result = match cli.command {
        None => monitor::run(cli.watch, false),
        Some(Command::Serve { watch }) => monitor::run(*watch, true),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "jitterwatch", &mut std::io::stdout().lock());
            Ok(0)
        }
        Some(Command::Manpage) => manpage::render(&mut std::io::stdout().lock()).map(|()| 0).map_err(Into::into),
        Some(Command::Events { cpus, duration, format, file }) => events_cmd::run(cpus.as_deref(), duration, format, file.as_deref()),
        Some(Command::Compare { runs, out }) => compare::run(out.options(runs), &mut std::io::stdout().lock()),
        Some(Command::Explain { ops, runs, how }) => explain::run(how.options(ops, runs), &mut std::io::stdout().lock()),
        Some(Command::Report { run, out }) => compare::run(out.options(vec![run]), &mut std::io::stdout().lock()),
        Some(Command::ReplayBench { cpus, events }) => replay::run(cpus as usize, events, &mut std::io::stdout().lock()),
        Some(Command::Doctor { cpus, json }) => {
            let root = std::path::Path::new("/");
            checks::existing_cpus(root, cpus.as_deref()).and_then(|cpus| doctor::run(root, &cpus, json, &mut std::io::stdout().lock()))
        }
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        // `jitterwatch ... | head` closing the pipe is a normal way to stop:
        // the one place a broken pipe is recognised.
        Err(e) if e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            say!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

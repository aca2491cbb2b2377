//! The run's outputs besides the screen, opened before anything spins (a
//! path that cannot be written fails the run there), and the lines that
//! say where the traces go.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::WatchArgs;
use crate::export::CsvSink;
use crate::interval::Method;
use crate::say::say;
use crate::sink::outputs::Outputs;
use crate::source::Started;

/// Every file output of the run: the sinks (the metrics join them once the
/// collector knows its CPUs), and the summary's file and path.
pub struct Opened {
    pub outputs: Outputs,
    /// Where the summary goes: checked now, written whole at the end.
    pub summary_file: Option<PathBuf>,
}

/// `tui`: the screen will show (the flight recorder then says nothing).
pub fn open(args: &WatchArgs, cpus: &[usize], method: Method, tui: bool) -> Result<Opened> {
    refuse_shared(args)?;
    let csv = args.csv.as_deref().map(CsvSink::create).transpose()?.map(|mut c| {
        c.in_syscall = args.csv_in_syscall;
        c
    });
    let summary_file = match args.summary_json.clone().or_else(|| args.csv.as_deref().map(crate::summary::sidecar)) {
        Some(p) => {
            crate::output::check_writable(&p, "the run summary")?;
            Some(p)
        }
        None => None,
    };
    let (recorder, whole) = traces(args, cpus, method, tui)?;
    let on_stall = match &args.on_stall {
        Some(cmd) => {
            let runner = crate::on_stall::Runner::spawn(cmd.clone(), tui)
                .map_err(|e| anyhow::anyhow!("--on-stall: cannot start its thread: {e}"))?;
            Some(crate::sink::outputs::OnStall::new(runner, args.fail_above.or(args.stop_above)))
        }
        None => None,
    };
    Ok(Opened { outputs: Outputs { csv, metrics: None, recorder, whole, on_stall }, summary_file })
}

/// Two outputs that lead to one file, refused before any is created (the
/// second would replace the first: a CSV overwritten by the summary).
fn refuse_shared(args: &WatchArgs) -> Result<()> {
    let sidecar = args.csv.as_deref().map(crate::summary::sidecar);
    let mut named: Vec<(&str, &std::path::Path)> = Vec::new();
    if let Some(p) = &args.csv {
        named.push(("--csv", p));
    }
    match (&args.summary_json, &sidecar) {
        (Some(p), _) => named.push(("--summary-json", p)),
        (None, Some(p)) => named.push(("the summary beside --csv", p)),
        (None, None) => {}
    }
    if let Some(p) = &args.record {
        named.push(("--record", p));
    }
    crate::output::refuse_shared(&named).map_err(anyhow::Error::msg)
}

/// The longest --trace-keep: the recorder's memory cap bounds it anyway.
const MAX_KEEP_NS: u64 = 10_000_000_000;
const DEFAULT_KEEP_NS: u64 = 50_000_000;

/// The flight recorder and the recording, ready before anything spins (a
/// directory or file that cannot be written fails the run here).
pub fn traces(
    args: &WatchArgs,
    cpus: &[usize],
    method: Method,
    tui: bool,
) -> Result<(Option<crate::trace::FlightRecorder>, Option<crate::trace::Whole>)> {
    let recorder = match &args.trace_dir {
        Some(dir) => {
            let keep_ns = args.trace_keep.unwrap_or(DEFAULT_KEEP_NS);
            if keep_ns > MAX_KEEP_NS {
                anyhow::bail!(
                    "--trace-keep {} is over 10s: traces are for the moments around a stall (use --record for a whole run)",
                    crate::units::ns(keep_ns)
                );
            }
            let opts = crate::trace::Options {
                dir: dir.clone(),
                keep_ns,
                above_ns: args.trace_above,
                max_per_minute: args.trace_max,
                format: args.trace_format,
                method,
                announce: !tui,
            };
            Some(crate::trace::FlightRecorder::new(opts, cpus)?)
        }
        None => None,
    };
    let whole = match &args.record {
        Some(path) => Some(crate::trace::Whole::new(path, "--record's trace", args.trace_format, cpus, method, crate::clock::now_ns())?),
        None => None,
    };
    Ok((recorder, whole))
}

/// One line each for the flight recorder and the recording, once the
/// thresholds are known (the default --trace-above follows them).
pub fn say_traces(args: &WatchArgs, started: &Started) {
    if let Some(dir) = &args.trace_dir {
        let above = match (args.trace_above, started.shared_threshold) {
            (Some(a), _) => crate::units::ns(a),
            (None, Some(t)) => {
                format!("{} ({} × the threshold)", crate::units::ns(crate::trace::ABOVE_THRESHOLDS * t), crate::trace::ABOVE_THRESHOLDS)
            }
            (None, None) => {
                let each: Vec<String> = started
                    .thresholds
                    .iter()
                    .map(|&(cpu, t)| format!("{cpu}: {}", crate::units::ns(crate::trace::ABOVE_THRESHOLDS * t)))
                    .collect();
                format!("{} × the threshold ({})", crate::trace::ABOVE_THRESHOLDS, each.join(", "))
            }
        };
        say!(
            "flight recorder: stalls at or above {above} traced into {} ({}, at most {} a minute); each CPU keeps its last {} of events, at most {:.0} MiB",
            crate::sanitize::visible(&dir.display().to_string()),
            args.trace_format.extension(),
            args.trace_max,
            crate::units::ns(args.trace_keep.unwrap_or(DEFAULT_KEEP_NS)),
            crate::trace::cap_mib()
        );
    }
    if let Some(path) = &args.record {
        say!(
            "recording the whole run into {} (at most {} MiB of events: a longer run is cut there)",
            crate::sanitize::visible(&path.display().to_string()),
            crate::trace::RECORD_CAP_BYTES >> 20
        );
    }
}

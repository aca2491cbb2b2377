//! `jitterwatch manpage`: the man page, clap_mangen's sections from the
//! clap definitions (the options under their --help headings), then what
//! a man page reader looks for and clap does not hold: examples, exit
//! status, environment, files, see also.

use std::io::{self, Write};

use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};

use crate::cli::Cli;

/// The README's recipes, as (what for, the command lines).
const EXAMPLES: [(&str, &[&str]); 6] = [
    ("Watch CPU 7 live, until q:", &["sudo jitterwatch --cpus 7"]),
    (
        "A headless run during a load test, one CSV row per stall:",
        &["sudo jitterwatch --cpus 7 --duration 10m --no-tui --csv loadtest.csv"],
    ),
    ("Watch an application's own threads (passive mode, no probe):", &["sudo jitterwatch --pid $(pidof app)"]),
    (
        "How late a thread sleeping to a 500 µs period wakes, under SCHED_FIFO 80:",
        &["sudo jitterwatch --cpus 6 --probe wakeup --period 500us --rt 80"],
    ),
    (
        "Before and after tuning:",
        &[
            "sudo jitterwatch --cpus 3 --duration 60s --no-tui --csv untuned.csv",
            "sudo jitterwatch --cpus 3 --duration 60s --no-tui --csv tuned.csv",
            "jitterwatch compare untuned.csv tuned.csv --png compare.png",
        ],
    ),
    (
        "A service with a Prometheus endpoint (what the packaged unit runs):",
        &["sudo jitterwatch serve --cpus 6,7 --prometheus 127.0.0.1:9464"],
    ),
];

const EXIT_STATUS: [(&str, &str); 4] = [
    ("0", "The run ended as asked (q, Ctrl-C, SIGTERM, --duration)."),
    ("1", "An error, said in one line on stderr; a watched CPU went offline; doctor found something to warn about."),
    ("2", "A command line it cannot take, said in one line."),
    ("3", "--stop-above stopped the run at a stall at or over its limit, or a stall reached --fail-above (the run went to its end)."),
];

const ENVIRONMENT: [(&str, &str); 2] = [
    ("NO_COLOR", "Set and not empty: the live screen draws without colour (no-color.org)."),
    ("JITTERWATCH_DEBUG", "Set (to anything): also print everything libbpf says while the programs load, the verifier's log included."),
];

const FILES: [(&str, &str); 5] = [
    ("/sys/devices/system/cpu/isolated", "The CPUs watched when --cpus is not given."),
    ("/run/jitterwatch/cpuN.lock", "Held by the run that watches CPU N; a second run on that CPU is refused with its pid."),
    ("/etc/default/jitterwatch", "JITTERWATCH_OPTS, the options of jitterwatch.service (jitterwatch serve)."),
    ("/usr/share/jitterwatch/", "The Grafana dashboard and the Prometheus alert rules."),
    ("/usr/share/doc/jitterwatch/", "The README and docs/: every option, the CSV, how it works."),
];

const SEE_ALSO: &str = "rtla-osnoise(1), rtla-timerlat(1), perf-sched(1), cyclictest(8)";

pub fn render(w: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(Cli::command());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    extra().to_writer(w)?;
    man.render_version_section(w)
}

/// A tagged paragraph per (tag, text), as man pages list items.
fn items(r: &mut Roff, list: &[(&str, &str)]) {
    for (tag, text) in list {
        r.control("TP", []);
        r.text([bold(*tag)]);
        r.text([roman(*text)]);
    }
}

fn extra() -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["EXAMPLES"]);
    for (what, lines) in EXAMPLES {
        r.control("PP", []);
        r.text([roman(what)]);
        r.control("RS", []);
        r.control("nf", []);
        for l in lines {
            r.text([roman(*l)]);
        }
        r.control("fi", []);
        r.control("RE", []);
    }
    r.control("SH", ["EXIT STATUS"]);
    items(&mut r, &EXIT_STATUS);
    r.control("SH", ["ENVIRONMENT"]);
    items(&mut r, &ENVIRONMENT);
    r.control("SH", ["FILES"]);
    items(&mut r, &FILES);
    r.control("SH", ["SEE ALSO"]);
    r.text([roman(SEE_ALSO)]);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> String {
        let mut out = Vec::new();
        render(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn sections_in_order_options_under_their_headings() {
        let p = page();
        let at = |s: &str| {
            p.find(&format!(".SH {s}\n")).or_else(|| p.find(&format!(".SH \"{s}\"\n"))).unwrap_or_else(|| panic!("no {s} in\n{p}"))
        };
        let order = [
            "NAME",
            "SYNOPSIS",
            "WATCH",
            "PROBE",
            "OUTPUT",
            "PASSIVE MODE",
            "ORIGINS",
            "FLEET",
            "RECORDING",
            "SUBCOMMANDS",
            "EXAMPLES",
            "EXIT STATUS",
            "ENVIRONMENT",
            "FILES",
            "SEE ALSO",
            "VERSION",
        ];
        let pos: Vec<usize> = order.iter().map(|s| at(s)).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "sections out of order: {order:?} at {pos:?}");
        // An option sits in its heading's section.
        let probe = &p[at("PROBE")..at("OUTPUT")];
        assert!(probe.contains("\\-\\-timer\\-slack") || probe.contains("--timer-slack"), "{probe}");
    }

    #[test]
    fn examples_use_options_that_exist() {
        let cmd = Cli::command();
        let mut known: Vec<String> = cmd.get_arguments().filter_map(|a| a.get_long().map(str::to_string)).collect();
        for sub in cmd.get_subcommands() {
            known.extend(sub.get_arguments().filter_map(|a| a.get_long().map(str::to_string)));
        }
        for (_, lines) in EXAMPLES {
            for l in lines {
                for word in l.split_whitespace().filter_map(|w| w.strip_prefix("--")) {
                    assert!(known.iter().any(|k| k == word), "--{word} in {l:?} is not an option");
                }
            }
        }
    }
}

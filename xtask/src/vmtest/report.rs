//! What a VM said on its serial console (the guest script's `JWTEST` lines),
//! and the table of every VM: kernel × mode × check, with the tick rate
//! jitterwatch saw on the watched CPU beside the kernel's own LOC count.

use std::fmt::Write;

/// The checks, in the table's column order.
pub const CHECKS: &[&str] = &["load", "events", "csv", "doctor", "passive-running", "passive-new", "wakeup-probe", "exit", "ticks", "rtla"];

/// Checks only some kernels have (rtla: those with the osnoise and timerlat
/// tracers); where a kernel should have one, the caller adds it, failed if
/// the guest said nothing.
const OPTIONAL: &[&str] = &["rtla"];

/// Most ticks a second on a tuned CPU of a kernel with NO_HZ_FULL (the
/// residual 1 Hz tick of a CPU running one task), and how far from the
/// kernel's LOC count jitterwatch's rate may be elsewhere.
const TUNED_MAX: f64 = 2.0;
const AGREE: f64 = 0.10;

/// The `ticks` check: at most [`TUNED_MAX`] a second over the run where
/// the CPU is nohz_full, else within [`AGREE`] of the kernel's count over
/// the same window. None when jitterwatch gave no rate (its run failed:
/// `load` says why).
pub fn ticks_check(nohz_full: bool, r: &VmResult) -> Option<Check> {
    let run = r.jw_ticks?;
    let (pass, detail) = match (r.jw_window_ticks, r.kernel_ticks) {
        _ if nohz_full => (run <= TUNED_MAX, format!("{run:.1}/s on a nohz_full CPU (at most {TUNED_MAX}/s)")),
        (None, _) => (false, "no window inside the run (it ended first)".to_string()),
        (Some(jw), Some(k)) if k > 0.0 => {
            let off = (jw - k) / k;
            (off.abs() <= AGREE, format!("{jw:.1}/s against the kernel's {k:.1}/s ({:+.0}%)", off * 100.0))
        }
        (Some(jw), _) => (jw == 0.0, format!("{jw:.1}/s, the kernel counted none")),
    };
    Some(Check { name: "ticks".to_string(), pass, detail })
}

#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    pub pass: bool,
    pub detail: String,
}

/// One VM's results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmResult {
    /// `uname -r`, from the boot line.
    pub release: Option<String>,
    pub checks: Vec<Check>,
    /// Ticks per second on the watched CPU: jitterwatch's over its run, and
    /// over a window inside it where the kernel's own count (LOC) was read.
    pub jw_ticks: Option<f64>,
    pub jw_window_ticks: Option<f64>,
    pub kernel_ticks: Option<f64>,
    /// The script reached its end (else the VM crashed or hung).
    pub ended: bool,
    /// Beside rtla: per tool and class, rtla's count and ours (rtla.rs).
    pub rtla: Vec<super::rtla::Class>,
}

impl VmResult {
    pub fn passed(&self) -> bool {
        self.ended && CHECKS.iter().all(|c| self.check(c).map_or(OPTIONAL.contains(c), |k| k.pass))
    }

    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// `key=value` words of a JWTEST line; `detail=` takes the rest of it.
fn fields(line: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        if let Some(v) = rest.strip_prefix("detail=") {
            out.push(("detail", v.trim_end()));
            break;
        }
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        if let Some((k, v)) = word.split_once('=') {
            out.push((k, v));
        }
        rest = tail;
    }
    out
}

/// Parses a serial log. Kernel messages may share it: a JWTEST line is
/// found wherever it starts in a line.
pub fn parse(serial: &str) -> VmResult {
    let mut r = VmResult::default();
    for line in serial.lines() {
        let Some(at) = line.find("JWTEST ") else { continue };
        let body = line[at + 7..].trim_end_matches('\r');
        let f = fields(body);
        let get = |k: &str| f.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let num = |k: &str| get(k).and_then(|v| v.parse::<f64>().ok());
        if body.starts_with("boot ") {
            r.release = get("kernel").map(str::to_string);
        } else if body.starts_with("end") {
            r.ended = true;
        } else if let (Some(name), Some(result)) = (get("check"), get("result")) {
            r.checks.push(Check { name: name.to_string(), pass: result == "pass", detail: get("detail").unwrap_or("").to_string() });
        } else if let (Some(tool), Some(class)) = (get("rtla_tool"), get("class")) {
            let count = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
            r.rtla.push(super::rtla::Class { tool: tool.to_string(), class: class.to_string(), rtla: count("rtla"), jw: count("jw") });
        } else if let Some(metric) = get("metric") {
            let rate = match (num("count"), num("ns"), num("from"), num("to")) {
                (Some(c), Some(ns), _, _) if ns > 0.0 => Some(c / (ns / 1e9)),
                (Some(c), None, Some(from), Some(to)) if to > from => Some(c / (to - from)),
                _ => None,
            };
            match metric {
                "jw_ticks" => r.jw_ticks = rate,
                "jw_window_ticks" => r.jw_window_ticks = rate,
                "kernel_ticks" => r.kernel_ticks = rate,
                _ => {}
            }
        }
    }
    r
}

/// One row of the table.
pub struct Row<'a> {
    pub kernel: &'a str,
    pub mode: &'a str,
    pub result: &'a VmResult,
    pub secs: f64,
}

fn rate(v: Option<f64>) -> String {
    match v {
        Some(r) if r < 10.0 => format!("{r:.1}"),
        Some(r) => format!("{r:.0}"),
        None => "-".to_string(),
    }
}

/// The table (Markdown), then one line per failed check with its detail.
pub fn table(rows: &[Row<'_>]) -> String {
    let mut s = String::from("| kernel | release | mode |");
    for c in CHECKS {
        let _ = write!(s, " {c} |");
    }
    s += " ticks/s (jitterwatch) | ticks/s (kernel LOC) | VM s |\n|---|---|---|";
    s += &"---|".repeat(CHECKS.len() + 3);
    s.push('\n');
    let mut notes = String::new();
    for row in rows {
        let r = row.result;
        let _ = write!(s, "| {} | {} | {} |", row.kernel, r.release.as_deref().unwrap_or("?"), row.mode);
        for c in CHECKS {
            let cell = match r.check(c) {
                Some(k) if k.pass => "pass",
                Some(k) => {
                    let _ = writeln!(notes, "{} {} {c}: {}", row.kernel, row.mode, k.detail);
                    "FAIL"
                }
                None => "-",
            };
            let _ = write!(s, " {cell} |");
        }
        let _ = writeln!(s, " {} | {} | {:.0} |", rate(r.jw_window_ticks.or(r.jw_ticks)), rate(r.kernel_ticks), row.secs);
        if !r.ended {
            let what =
                if r.release.is_none() { "never reached the guest script (no boot line)" } else { "stopped before the end of the checks" };
            let _ = writeln!(notes, "{} {}: the VM {what}", row.kernel, row.mode);
        }
    }
    s + &notes
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "SeaBIOS\r\nJWTEST boot kernel=6.1.0-50-amd64 mode=tuned cpu=3 cpus=4 uptime=4.82\r\n\
        JWTEST check=load result=pass detail=jitterwatch: watching CPU 3; threshold\r\n\
        [   6.1] some kernel line JWTEST check=exit result=fail detail=status 1\n\
        JWTEST check=csv result=pass detail=rows=12 bad=0 header=time_ns,cpu\n\
        JWTEST metric=jw_ticks count=3 ns=3000000000\n\
        JWTEST metric=kernel_ticks count=4 from=10.00 to=12.00\n\
        JWTEST end uptime=20.1\n";

    #[test]
    fn parses_checks_and_rates() {
        let r = parse(LOG);
        assert_eq!(r.release.as_deref(), Some("6.1.0-50-amd64"));
        assert!(r.ended);
        assert_eq!(r.checks.len(), 3);
        assert!(r.check("load").unwrap().pass);
        assert_eq!(r.check("load").unwrap().detail, "jitterwatch: watching CPU 3; threshold");
        let exit = r.check("exit").unwrap();
        assert!(!exit.pass);
        assert_eq!(exit.detail, "status 1");
        assert_eq!(r.jw_ticks, Some(1.0));
        assert_eq!(r.kernel_ticks, Some(2.0));
        assert!(!r.passed());
    }

    #[test]
    fn parses_the_rtla_comparison() {
        let r = parse("JWTEST rtla_tool=osnoise class=irq rtla=2503 jw=2513\nJWTEST rtla_tool=timerlat class=wakeups rtla=9343 jw=\n");
        assert_eq!(r.rtla.len(), 2);
        assert_eq!(
            (r.rtla[0].tool.as_str(), r.rtla[0].class.as_str(), r.rtla[0].rtla, r.rtla[0].jw),
            ("osnoise", "irq", Some(2503), Some(2513))
        );
        assert_eq!(r.rtla[1].jw, None);
    }

    #[test]
    fn tick_rates_are_judged_by_the_cpus_tuning() {
        let rates = |run: Option<f64>, window: Option<f64>, kernel: Option<f64>| VmResult {
            jw_ticks: run,
            jw_window_ticks: window,
            kernel_ticks: kernel,
            ..Default::default()
        };
        assert!(ticks_check(true, &rates(Some(0.7), Some(0.0), Some(1.0))).unwrap().pass);
        let busy = ticks_check(true, &rates(Some(145.0), Some(145.0), Some(145.0))).unwrap();
        assert!(!busy.pass && busy.detail.contains("nohz_full"), "{busy:?}");
        assert!(ticks_check(false, &rates(Some(100.0), Some(140.0), Some(146.0))).unwrap().pass);
        let off = ticks_check(false, &rates(Some(150.0), Some(120.0), Some(150.0))).unwrap();
        assert!(!off.pass && off.detail.ends_with("(-20%)"), "{off:?}");
        assert!(ticks_check(false, &rates(Some(0.0), Some(0.0), Some(0.0))).unwrap().pass);
        assert!(!ticks_check(false, &rates(Some(150.0), None, None)).unwrap().pass);
        assert!(ticks_check(false, &rates(None, None, None)).is_none());
    }

    #[test]
    fn a_vm_that_never_booted_has_nothing() {
        let r = parse("qemu: could not load kernel\n");
        assert_eq!(r, VmResult::default());
        assert!(!r.passed());
        let r = parse("JWTEST metric=jw_ticks count=3 ns=0\n");
        assert_eq!(r.jw_ticks, None);
    }

    #[test]
    fn renders_a_row_per_vm_and_the_failures_below() {
        let ok = VmResult {
            release: Some("5.10.0-32-amd64".into()),
            checks: CHECKS.iter().map(|c| Check { name: c.to_string(), pass: true, detail: String::new() }).collect(),
            jw_ticks: Some(0.74),
            jw_window_ticks: None,
            kernel_ticks: Some(152.4),
            ended: true,
            rtla: Vec::new(),
        };
        assert!(ok.passed());
        let bad = parse(LOG);
        let t = table(&[
            Row { kernel: "debian11", mode: "untuned", result: &ok, secs: 41.2 },
            Row { kernel: "debian12", mode: "tuned", result: &bad, secs: 30.0 },
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("| kernel | release | mode | load | events |"), "{t}");
        assert_eq!(lines[1].matches("---").count(), CHECKS.len() + 6);
        assert!(lines[2].starts_with("| debian11 | 5.10.0-32-amd64 | untuned | pass |"), "{t}");
        assert!(lines[2].ends_with("| 0.7 | 152 | 41 |"), "{t}");
        assert!(lines[3].contains("| tuned | pass | - | pass | - |"), "{t}");
        assert!(t.contains("debian12 tuned exit: status 1\n"), "{t}");
        let hung = VmResult { release: Some("x".into()), ..Default::default() };
        let t = table(&[Row { kernel: "sid", mode: "tuned", result: &hung, secs: 600.0 }]);
        assert!(t.contains("sid tuned: the VM stopped before the end of the checks"), "{t}");
    }
}

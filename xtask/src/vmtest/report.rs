//! What a VM said on its serial console (the guest script's `JWTEST` lines),
//! and the table of every VM: kernel × mode × check, with the ticks
//! jitterwatch counted on the watched CPU beside the kernel's own LOC count.

use std::fmt::Write;

use super::check::Check;
use super::rtla::{Class, Gaps};

/// The checks, in the table's column order.
pub const CHECKS: &[&str] = &[
    "load",
    "events",
    "csv",
    "clock",
    "doctor",
    "passive-running",
    "passive-new",
    "wakeup-probe",
    "switch-hook",
    "nonroot",
    "memlock",
    "exit",
    "dispatch",
    "ticks",
    "tick-why",
    "stacks",
    "rtla",
];

/// Checks only some kernels have (rtla: those with the osnoise and timerlat
/// tracers); where a kernel should have one, the caller adds it, failed if
/// the guest said nothing.
const OPTIONAL: &[&str] = &["rtla"];

/// Most ticks a second on a tuned CPU of a kernel with NO_HZ_FULL (the
/// residual 1 Hz tick of a CPU running one task).
const TUNED_MAX: f64 = 2.0;

/// The ticks of the watched CPU over a window inside the spin probe's run
/// (the guest's `JWTEST ticks` line): the kernel's own count (LOC, read at
/// both ends) and jitterwatch's exact count of local-timer interrupts
/// (`jitterwatch events`, one line per entry and exit), as a range because
/// each end of the window is known only between two clock readings: the
/// ticks surely inside it, and those that may be.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ticks {
    pub kernel: Option<u64>,
    pub jw_min: Option<u64>,
    pub jw_max: Option<u64>,
    pub window_ns: Option<u64>,
    /// Events the ring buffer dropped (then no count is exact).
    pub drops: Option<u64>,
    /// Why there is no window (the run ended first).
    pub missing: Option<String>,
}

impl Ticks {
    /// Ticks a second over the window: the kernel's, and jitterwatch's at
    /// most.
    pub fn rates(&self) -> (Option<f64>, Option<f64>) {
        let secs = self.window_ns.filter(|&n| n > 0).map(|n| n as f64 / 1e9);
        let per = |c: Option<u64>| Some(c? as f64 / secs?);
        (per(self.kernel), per(self.jw_max))
    }
}

/// The `ticks` check: the kernel's count of the window lies in
/// jitterwatch's range (every local-timer interrupt seen, none invented),
/// nothing was dropped, and where the CPU is nohz_full, at most
/// [`TUNED_MAX`] a second. None when the guest said nothing of ticks (the
/// run failed to load: `load` says why).
pub fn ticks_check(nohz_full: bool, r: &VmResult) -> Option<Check> {
    let t = r.ticks.as_ref()?;
    let fail = |detail: String| Some(Check { name: "ticks".to_string(), pass: false, detail });
    if let Some(why) = &t.missing {
        return fail(why.clone());
    }
    let (Some(k), Some(lo), Some(hi), Some(_)) = (t.kernel, t.jw_min, t.jw_max, t.window_ns) else {
        return fail(format!("an incomplete tick count: {t:?}"));
    };
    let (k_rate, jw_rate) = t.rates();
    let (k_rate, jw_rate) = (k_rate.unwrap_or(0.0), jw_rate.unwrap_or(0.0));
    let range = if lo == hi { format!("{lo}") } else { format!("{lo}..{hi}") };
    match t.drops {
        Some(0) => {}
        Some(d) => return fail(format!("{d} events dropped: no exact count")),
        None => return fail("jitterwatch events said nothing of drops".to_string()),
    }
    if !(lo..=hi).contains(&k) {
        let off = if k < lo { format!("{} more", lo - k) } else { format!("{} missed", k - hi) };
        return fail(format!("the kernel counted {k}, jitterwatch {range}: {off}"));
    }
    if nohz_full && jw_rate > TUNED_MAX {
        return fail(format!("{jw_rate:.1}/s on a nohz_full CPU (at most {TUNED_MAX}/s)"));
    }
    let detail = format!("the kernel's {k} in jitterwatch's {range} ({k_rate:.1}/s)");
    Some(Check { name: "ticks".to_string(), pass: true, detail })
}

/// One VM's results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmResult {
    /// `uname -r`, from the boot line.
    pub release: Option<String>,
    pub checks: Vec<Check>,
    /// The watched CPU's ticks over a window inside the probe's run.
    pub ticks: Option<Ticks>,
    /// The script reached its end (else the VM crashed or hung).
    pub ended: bool,
    /// Beside rtla: per tool and class, rtla's count and ours (rtla.rs).
    pub rtla: Vec<Class>,
    /// And osnoise's gaps beside ours.
    pub rtla_gaps: Option<Gaps>,
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
        if body.starts_with("boot ") {
            r.release = get("kernel").map(str::to_string);
        } else if body.starts_with("end") {
            r.ended = true;
        } else if let (Some(name), Some(result)) = (get("check"), get("result")) {
            r.checks.push(Check { name: name.to_string(), pass: result == "pass", detail: get("detail").unwrap_or("").to_string() });
        } else if let (Some(tool), Some(class)) = (get("rtla_tool"), get("class")) {
            let count = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
            r.rtla.push(Class { tool: tool.to_string(), class: class.to_string(), rtla: count("rtla"), jw: count("jw") });
        } else if body.starts_with("rtla_gaps ") {
            let count = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
            r.rtla_gaps = Some(Gaps {
                osnoise: count("osnoise"),
                hw: count("hw"),
                overrun: count("overrun"),
                jw: count("jw"),
                interrupted: count("interrupted"),
                preempted: count("preempted"),
            });
        } else if body.starts_with("ticks ") {
            let count = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
            r.ticks = Some(Ticks {
                kernel: count("kernel"),
                jw_min: count("jw_min"),
                jw_max: count("jw_max"),
                window_ns: count("window_ns"),
                drops: count("drops"),
                missing: get("detail").map(str::to_string),
            });
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

/// The table (Markdown), then one line per failed check with its detail;
/// `tick_count` names the kernel's own count of the ticks (x86's LOC row).
pub fn table(rows: &[Row<'_>], tick_count: &str) -> String {
    let mut s = String::from("| kernel | release | mode |");
    for c in CHECKS {
        let _ = write!(s, " {c} |");
    }
    let _ = write!(s, " ticks/s ({tick_count}) | window ticks: jitterwatch (kernel) | VM s |\n|---|---|---|");
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
        let t = r.ticks.clone().unwrap_or_default();
        let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        let jw = if t.jw_min == t.jw_max { n(t.jw_min) } else { format!("{}..{}", n(t.jw_min), n(t.jw_max)) };
        let _ = writeln!(s, " {} | {jw} ({}) | {:.0} |", rate(t.rates().0), n(t.kernel), row.secs);
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
        JWTEST ticks kernel=500 jw_min=499 jw_max=501 window_ns=2000000000 drops=0\n\
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
        let t = r.ticks.as_ref().unwrap();
        assert_eq!((t.kernel, t.jw_min, t.jw_max, t.window_ns, t.drops), (Some(500), Some(499), Some(501), Some(2_000_000_000), Some(0)));
        assert_eq!(t.rates(), (Some(250.0), Some(250.5)));
        assert_eq!(t.missing, None);
        assert!(!r.passed());
    }

    #[test]
    fn parses_the_rtla_comparison() {
        let r = parse(
            "JWTEST rtla_tool=osnoise class=irq rtla=2503 jw=2513\nJWTEST rtla_tool=timerlat class=wakeups rtla=9343 jw=\n\
             JWTEST rtla_gaps osnoise=14 hw=10954 overrun=0 jw=27 interrupted=18 preempted=7\n",
        );
        let g = r.rtla_gaps.clone().unwrap();
        assert_eq!(
            (g.osnoise, g.hw, g.overrun, g.jw, g.interrupted, g.preempted),
            (Some(14), Some(10954), Some(0), Some(27), Some(18), Some(7))
        );
        assert_eq!(r.rtla.len(), 2);
        assert_eq!(
            (r.rtla[0].tool.as_str(), r.rtla[0].class.as_str(), r.rtla[0].rtla, r.rtla[0].jw),
            ("osnoise", "irq", Some(2503), Some(2513))
        );
        assert_eq!(r.rtla[1].jw, None);
    }

    fn ticks(line: &str) -> VmResult {
        parse(&format!("JWTEST {line}\n"))
    }

    #[test]
    fn the_kernels_tick_count_must_lie_in_jitterwatchs_exact_range() {
        let judge = |nohz: bool, line: &str| ticks_check(nohz, &ticks(line)).unwrap();
        let ok = judge(false, "ticks kernel=664 jw_min=663 jw_max=665 window_ns=2000000000 drops=0");
        assert!(ok.pass, "{ok:?}");
        assert_eq!(ok.detail, "the kernel's 664 in jitterwatch's 663..665 (332.0/s)");
        assert!(judge(false, "ticks kernel=663 jw_min=663 jw_max=663 window_ns=2000000000 drops=0").pass);
        // The gap-row count of before (285/s against 332/s) fails, by one tick too.
        let under = judge(false, "ticks kernel=664 jw_min=570 jw_max=570 window_ns=2000000000 drops=0");
        assert!(!under.pass && under.detail.ends_with("jitterwatch 570: 94 missed"), "{under:?}");
        assert!(!judge(false, "ticks kernel=664 jw_min=660 jw_max=663 window_ns=2000000000 drops=0").pass);
        let over = judge(false, "ticks kernel=664 jw_min=665 jw_max=666 window_ns=2000000000 drops=0");
        assert!(!over.pass && over.detail.ends_with("665..666: 1 more"), "{over:?}");
        let dropped = judge(false, "ticks kernel=664 jw_min=664 jw_max=664 window_ns=2000000000 drops=3");
        assert!(!dropped.pass && dropped.detail.contains("3 events dropped"), "{dropped:?}");
        assert!(!judge(false, "ticks kernel=664 jw_min=664 jw_max=664 window_ns=2000000000 drops=none").pass);
        assert!(!judge(false, "ticks kernel= jw_min=664 jw_max=664 window_ns=2000000000 drops=0").pass);
        let ended = judge(false, "ticks detail=no window inside the run");
        assert!(!ended.pass && ended.detail == "no window inside the run", "{ended:?}");
    }

    #[test]
    fn a_nohz_full_cpu_has_at_most_two_ticks_a_second() {
        let judge = |nohz: bool, line: &str| ticks_check(nohz, &ticks(line)).unwrap();
        assert!(judge(true, "ticks kernel=2 jw_min=2 jw_max=2 window_ns=2000000000 drops=0").pass);
        let busy = judge(true, "ticks kernel=500 jw_min=500 jw_max=500 window_ns=2000000000 drops=0");
        assert!(!busy.pass && busy.detail.contains("nohz_full"), "{busy:?}");
        assert!(judge(false, "ticks kernel=500 jw_min=500 jw_max=500 window_ns=2000000000 drops=0").pass, "only where nohz_full");
        assert!(judge(true, "ticks kernel=0 jw_min=0 jw_max=0 window_ns=2000000000 drops=0").pass);
        assert!(ticks_check(true, &VmResult::default()).is_none(), "no line: the load check says why");
    }

    #[test]
    fn a_vm_that_never_booted_has_nothing() {
        let r = parse("qemu: could not load kernel\n");
        assert_eq!(r, VmResult::default());
        assert!(!r.passed());
        let r = parse("JWTEST ticks kernel=3 jw_min=3 jw_max=3 window_ns=0 drops=0\n");
        assert_eq!(r.ticks.unwrap().rates(), (None, None));
    }

    #[test]
    fn renders_a_row_per_vm_and_the_failures_below() {
        let ok = VmResult {
            release: Some("5.10.0-32-amd64".into()),
            checks: CHECKS.iter().map(|c| Check { name: c.to_string(), pass: true, detail: String::new() }).collect(),
            ticks: Some(Ticks {
                kernel: Some(305),
                jw_min: Some(304),
                jw_max: Some(305),
                window_ns: Some(2_000_000_000),
                drops: Some(0),
                missing: None,
            }),
            ended: true,
            rtla: Vec::new(),
            rtla_gaps: None,
        };
        assert!(ok.passed());
        let bad = parse(LOG);
        let t = table(
            &[
                Row { kernel: "debian11", mode: "untuned", result: &ok, secs: 41.2 },
                Row { kernel: "debian12", mode: "tuned", result: &bad, secs: 30.0 },
            ],
            "kernel LOC",
        );
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("| kernel | release | mode | load | events |"), "{t}");
        assert_eq!(lines[1].matches("---").count(), CHECKS.len() + 6);
        assert!(lines[2].starts_with("| debian11 | 5.10.0-32-amd64 | untuned | pass |"), "{t}");
        assert!(lines[2].ends_with("| 152 | 304..305 (305) | 41 |"), "{t}");
        assert!(lines[3].contains("| tuned | pass | - | pass | - |"), "{t}");
        assert!(t.contains("debian12 tuned exit: status 1\n"), "{t}");
        let hung = VmResult { release: Some("x".into()), ..Default::default() };
        let t = table(&[Row { kernel: "sid", mode: "tuned", result: &hung, secs: 600.0 }], "kernel arch_timer");
        assert!(t.lines().next().unwrap().contains("| ticks/s (kernel arch_timer) |"), "{t}");
        assert!(t.contains("sid tuned: the VM stopped before the end of the checks"), "{t}");
    }
}

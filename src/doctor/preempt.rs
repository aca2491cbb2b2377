//! The kernel's preemption model: how long a task woken onto a busy CPU
//! may wait for the one running there. Without kernel preemption (`none`)
//! it waits until that task gives up the CPU or reaches a preemption
//! point; `voluntary` adds points in long kernel paths; `full` preempts
//! anywhere outside a critical section; `lazy` preempts in-kernel at the
//! next tick; PREEMPT_RT makes most of the kernel preemptible. A
//! SCHED_FIFO server waited 77.9 ms behind apt-get on a `none` kernel.

use super::{finding, Ctx, Status};
use crate::sanitize::visible;

const CHECK: &str = "boot";

/// The model a PREEMPT_DYNAMIC kernel runs, from debugfs's
/// `sched/preempt` (`none voluntary (full) lazy`: the current one in
/// parentheses).
fn current(list: &str) -> Option<String> {
    let w = list.split_whitespace().find(|w| w.starts_with('(') && w.ends_with(')'))?;
    Some(w.trim_matches(|c| c == '(' || c == ')').to_string())
}

/// What the build string says (`#1 SMP PREEMPT_DYNAMIC ...`): RT, dynamic,
/// full (static PREEMPT), or none of them (a static none/voluntary build).
fn built(version: &str) -> &'static str {
    let words: Vec<&str> = version.split_whitespace().collect();
    if words.contains(&"PREEMPT_RT") {
        "PREEMPT_RT"
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        "PREEMPT_DYNAMIC"
    } else if words.contains(&"PREEMPT") {
        "PREEMPT"
    } else {
        "no PREEMPT"
    }
}

/// The model a PREEMPT_DYNAMIC kernel boots with when nothing else says
/// (CONFIG_PREEMPT_NONE, _VOLUNTARY, PREEMPT, _LAZY of its build), from
/// /boot/config-RELEASE or /proc/config.gz; with where it was read.
fn configured(cx: &mut Ctx) -> Option<(String, &'static str)> {
    use std::io::Read;
    let release = cx.read_opt("proc/sys/kernel/osrelease").map(|r| r.trim().to_string()).filter(|r| !r.is_empty() && !r.contains('/'));
    let text = match release.and_then(|r| cx.read_opt(&format!("boot/config-{r}"))) {
        Some(t) => Some((t, "/boot/config")),
        None => std::fs::File::open(cx.root.join("proc/config.gz")).ok().and_then(|f| {
            let mut t = String::new();
            // Bounded: a kernel's configuration is a few hundred KiB.
            flate2::read::GzDecoder::new(f).take(8 << 20).read_to_string(&mut t).ok()?;
            Some((t, "/proc/config.gz"))
        }),
    }?;
    let model = text.0.lines().find_map(|l| match l.trim() {
        "CONFIG_PREEMPT_NONE=y" => Some("none"),
        "CONFIG_PREEMPT_VOLUNTARY=y" => Some("voluntary"),
        "CONFIG_PREEMPT=y" => Some("full"),
        "CONFIG_PREEMPT_LAZY=y" => Some("lazy"),
        _ => None,
    })?;
    Some((model.to_string(), text.1))
}

pub(crate) fn check(cx: &mut Ctx) {
    let version = cx.read_opt("proc/sys/kernel/version").unwrap_or_default();
    // Unreadable: not known (never "built without").
    let build = if version.trim().is_empty() { "unknown" } else { built(&version) };
    let mut ev = vec![format!("/proc/sys/kernel/version: {}", visible(version.trim()))];
    let debugfs = cx.read_opt("sys/kernel/debug/sched/preempt");
    if let Some(d) = &debugfs {
        ev.push(format!("/sys/kernel/debug/sched/preempt: {}", visible(d.trim())));
    }
    let boot = cx.cmdline.get("preempt").map(str::to_string);
    if let Some(b) = &boot {
        ev.push(format!("/proc/cmdline: preempt={}", visible(b)));
    }
    let model = match build {
        "PREEMPT_RT" => Some("rt".to_string()),
        "PREEMPT" => Some("full".to_string()),
        "PREEMPT_DYNAMIC" => debugfs.as_deref().and_then(current).or(boot).or_else(|| {
            let (m, from) = configured(cx)?;
            let name = match m.as_str() {
                "full" => "CONFIG_PREEMPT",
                "none" => "CONFIG_PREEMPT_NONE",
                "voluntary" => "CONFIG_PREEMPT_VOLUNTARY",
                _ => "CONFIG_PREEMPT_LAZY",
            };
            ev.push(format!("{from}: {name}=y, the model it boots with"));
            Some(m)
        }),
        _ => None,
    };
    let fix = match build {
        "PREEMPT_DYNAMIC" => "boot with preempt=full (this kernel is PREEMPT_DYNAMIC), or now: echo full > /sys/kernel/debug/sched/preempt",
        _ => "run a kernel built with CONFIG_PREEMPT or CONFIG_PREEMPT_DYNAMIC (then preempt=full), or PREEMPT_RT",
    };
    let waits = "a task woken onto a busy CPU waits until the running task leaves it or reaches a preemption point: milliseconds behind a busy kernel path (a SCHED_FIFO server waited 77.9 ms behind apt-get)";
    let mut f = match model.as_deref() {
        Some(m @ ("full" | "rt" | "lazy")) => finding(CHECK, "preempt", Status::Ok, format!("preemption model: {}", visible(m)))
            .why("a woken task of higher priority preempts the kernel outside its critical sections"),
        Some(m) => {
            finding(CHECK, "preempt", Status::Warn, format!("preemption model: {} (kernel preemption off)", visible(m))).why(waits).fix(fix)
        }
        None if build == "no PREEMPT" => {
            finding(CHECK, "preempt", Status::Warn, "preemption model: none or voluntary (built without kernel preemption)")
                .why(waits)
                .fix(fix)
        }
        None => finding(
            CHECK,
            "preempt",
            Status::Info,
            "preemption model not known (debugfs's sched/preempt, the kernel's build string and preempt= say nothing)",
        )
        .why("none and voluntary let a woken task wait behind the running one for milliseconds; full does not")
        .fix("mount debugfs (mount -t debugfs none /sys/kernel/debug) and run doctor as root to read it"),
    };
    f.evidence = ev;
    cx.push(f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::fixture::Fx;
    use crate::doctor::{audit, Status};

    #[test]
    fn the_model_is_read_from_the_kernel() {
        assert_eq!(current("none voluntary (full) lazy\n").as_deref(), Some("full"));
        assert_eq!(current("(none) voluntary full"), Some("none".into()));
        assert_eq!(current("none voluntary full"), None);
        assert_eq!(built("#1 SMP PREEMPT_DYNAMIC Debian 6.1.0-50"), "PREEMPT_DYNAMIC");
        assert_eq!(built("#1 SMP PREEMPT_RT Debian"), "PREEMPT_RT");
        assert_eq!(built("#1 SMP Debian"), "no PREEMPT");

        let fx = Fx::untuned();
        fx.write("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.18\n");
        fx.write("sys/kernel/debug/sched/preempt", "(none) voluntary full lazy\n");
        let r = audit(fx.path(), &[1]);
        let f = r.find("preempt").expect("a finding");
        assert_eq!((f.status, f.title.as_str()), (Status::Warn, "preemption model: none (kernel preemption off)"));
        assert!(f.fix.as_deref().unwrap_or("").contains("preempt=full"), "{f:?}");
        fx.write("sys/kernel/debug/sched/preempt", "none voluntary (full) lazy\n");
        assert_eq!(audit(fx.path(), &[1]).find("preempt").unwrap().status, Status::Ok);
        // No debugfs, no preempt=: the build's default (this host's 6.18).
        let fx = Fx::untuned();
        fx.write("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC @0\n");
        fx.write("proc/sys/kernel/osrelease", "6.18.44\n");
        fx.write("boot/config-6.18.44", "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n");
        let r = audit(fx.path(), &[1]);
        let f = r.find("preempt").unwrap();
        assert_eq!((f.status, f.title.as_str()), (Status::Warn, "preemption model: none (kernel preemption off)"), "{f:?}");
        assert!(f.evidence.iter().any(|e| e == "/boot/config: CONFIG_PREEMPT_NONE=y, the model it boots with"), "{f:?}");
    }
}

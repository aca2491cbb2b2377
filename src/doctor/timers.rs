//! Timer and tick related knobs: timer migration, vmstat interval, RT
//! throttling and the deadline fair server.

use super::{finding, Ctx, Status};
use crate::sanitize::visible;

const CHECK: &str = "timers";

fn num(cx: &mut Ctx, rel: &str) -> Option<(i64, String)> {
    let s = cx.read_opt(rel)?;
    let v = s.trim().parse().ok()?;
    Some((v, format!("/{rel}: {}", visible(s.trim()))))
}

pub(crate) fn check(cx: &mut Ctx) {
    if let Some((v, ev)) = num(cx, "proc/sys/kernel/timer_migration") {
        let f = if v != 0 {
            finding(CHECK, "timer_migration", Status::Ok, "timer migration on")
        } else {
            finding(CHECK, "timer_migration", Status::Warn, "timer migration off: timers stay on the CPU that armed them")
                .fix("sysctl -w kernel.timer_migration=1")
        };
        cx.push(f.why("with kernel.timer_migration=1 timers armed on an idle isolated CPU are expired by a busy housekeeping CPU").ev(ev));
    }

    if let Some((v, ev)) = num(cx, "proc/sys/vm/stat_interval") {
        let f = if v >= 10 {
            finding(CHECK, "stat_interval", Status::Ok, format!("vm.stat_interval is {v} s"))
        } else {
            finding(CHECK, "stat_interval", Status::Warn, format!("vmstat_update runs every {v} s on each CPU (vm.stat_interval)"))
                .fix("sysctl -w vm.stat_interval=10 (or more; /proc/vmstat then lags by as much)")
        };
        cx.push(f.why("the vmstat work item (vmstat_update / refresh_vm_stats) folds per-CPU VM counters on each CPU that dirtied them, every stat_interval seconds, in a kworker on that CPU").ev(ev));
    }

    rt_throttling(cx);
    fair_server(cx);
}

fn rt_throttling(cx: &mut Ctx) {
    let Some((runtime, ev)) = num(cx, "proc/sys/kernel/sched_rt_runtime_us") else {
        if !cx.exists("proc/sys/kernel") {
            return;
        }
        let f = finding(CHECK, "rt_throttling", Status::Info, "RT throttling setting unknown")
            .ev("/proc/sys/kernel/sched_rt_runtime_us: unreadable or absent");
        cx.push(f);
        return;
    };
    let period = num(cx, "proc/sys/kernel/sched_rt_period_us");
    let mut f = if runtime < 0 {
        finding(CHECK, "rt_throttling", Status::Ok, "RT throttling off (sched_rt_runtime_us=-1)")
            .why("a SCHED_FIFO thread is never parked to let other tasks run")
    } else {
        let p = period.as_ref().map_or(1_000_000, |(p, _)| *p).max(1);
        let parked = (p - runtime).max(0);
        finding(CHECK, "rt_throttling", Status::Warn, format!("RT throttling parks a busy SCHED_FIFO thread {} ms every {} ms (sched_rt_runtime_us={runtime})", parked / 1000, p / 1000))
            .why("a SCHED_FIFO spinner that uses its whole runtime is descheduled for the rest of each period (measured ~50 ms every second at the default 950000/1000000); the CPU shows swapper/N and sched_rt_period_timer meanwhile")
            .fix("sysctl -w kernel.sched_rt_runtime_us=-1 (caveat: a runaway SCHED_FIFO task can then hang its CPU for good; keep housekeeping CPUs free of RT spinners)")
    };
    f = f.ev(ev);
    if let Some((_, pev)) = period {
        f = f.ev(pev);
    }
    cx.push(f);
}

fn fair_server(cx: &mut Ctx) {
    let base = "sys/kernel/debug/sched/fair_server";
    if !cx.exists(base) {
        let why =
            if cx.exists("sys/kernel/debug/sched") { "this kernel has no fair server" } else { "debugfs not mounted or not readable" };
        let f = finding(CHECK, "fair_server", Status::Info, format!("deadline fair server not checked ({why})"))
            .why("since 6.12 a deadline server reserves time (50 ms per second by default) for normal tasks starved by RT ones, even with RT throttling off")
            .ev(format!("/{base}: absent"))
            .fix("mount -t debugfs none /sys/kernel/debug, then run doctor again");
        cx.push(f);
        return;
    }
    let mut on = Vec::new();
    let mut ev = Vec::new();
    for &c in &cx.cpus.clone() {
        let rel = format!("{base}/cpu{c}/runtime");
        let Some(s) = cx.read(&rel) else { continue };
        let v: i64 = s.trim().parse().unwrap_or(0);
        ev.push(format!("/{rel}: {}", visible(s.trim())));
        if v > 0 {
            on.push((c, v));
        }
    }
    let mut f = if on.is_empty() {
        finding(CHECK, "fair_server", Status::Ok, "deadline fair server disabled on the watched CPUs")
    } else {
        let cpus: Vec<usize> = on.iter().map(|(c, _)| *c).collect();
        let fix = on.iter().map(|(c, _)| format!("echo 0 > /{base}/cpu{c}/runtime")).collect::<Vec<_>>().join("; ");
        finding(
            CHECK,
            "fair_server",
            Status::Warn,
            format!("fair server can preempt a SCHED_FIFO thread on {} ({} ms per period)", Ctx::cpu_word(&cpus), on[0].1 / 1_000_000),
        )
        .fix(format!("{fix} (caveat: a normal task queued on that CPU, e.g. a per-CPU kworker, then waits behind the RT thread for ever)"))
    };
    f = f.why("the deadline server runs starved normal (CFS/EEVDF) tasks, kworkers included, for its runtime every period, preempting SCHED_FIFO threads");
    f.evidence = ev;
    cx.push(f);
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, test_hints as hints, Status};

    #[test]
    fn timers_ok() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        for k in ["timer_migration", "stat_interval", "rt_throttling", "fair_server"] {
            assert_eq!(r.find(k).unwrap().status, Status::Ok, "{k}");
        }
        assert!(hints(&r, "timer", "sched_rt_period_timer").iter().all(|h| !h.contains("sysctl -w")));
    }

    #[test]
    fn timers_warn() {
        let fx = Fx::untuned();
        fx.write("proc/sys/kernel/timer_migration", "0\n");
        fx.write("sys/kernel/debug/sched/fair_server/cpu1/runtime", "50000000\n");
        let r = audit(fx.path(), &[1]);
        assert_eq!(r.find("timer_migration").unwrap().status, Status::Warn);
        let s = r.find("stat_interval").unwrap();
        assert_eq!(s.status, Status::Warn);
        let rt = r.find("rt_throttling").unwrap();
        assert_eq!(rt.status, Status::Warn);
        assert!(rt.title.contains("50 ms every 1000 ms"), "{}", rt.title);
        assert!(rt.fix.as_deref().unwrap().starts_with("sysctl -w kernel.sched_rt_runtime_us=-1"));
        let fs = r.find("fair_server").unwrap();
        assert_eq!(fs.status, Status::Warn);
        assert!(fs.fix.as_deref().unwrap().starts_with("echo 0 > /sys/kernel/debug/sched/fair_server/cpu1/runtime"));

        for (kind, name) in [("timer", "sched_rt_period_timer"), ("task", "swapper/1[0]")] {
            let h = hints(&r, kind, name);
            assert!(h.iter().any(|l| l.contains("sysctl -w kernel.sched_rt_runtime_us=-1")), "{kind} {name}: {h:?}");
            assert!(h.iter().any(|l| l.contains("fair_server/cpu1/runtime")), "{kind} {name}: {h:?}");
        }
        for name in ["vmstat_update", "refresh_vm_stats"] {
            let h = hints(&r, "work", name);
            assert!(h.iter().any(|l| l.contains("sysctl -w vm.stat_interval=10")), "{h:?}");
            assert!(h.iter().all(|l| !l.contains("workqueue/cpumask")), "{h:?}");
        }
        let h = hints(&r, "task", "kworker/1:0[41]");
        assert!(h.iter().any(|l| l.contains("vm.stat_interval")), "{h:?}");
    }

    #[test]
    fn fair_server_absent_is_info() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        assert_eq!(r.find("fair_server").unwrap().status, Status::Info);
    }
}

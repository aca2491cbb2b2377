//! Threads whose affinity allows a watched CPU, and threads that last ran
//! there (`processor`, field 39 of /proc/PID/task/TID/stat).

use std::collections::BTreeMap;

use super::{bounded, finding, Ctx, Status};
use crate::procfs::{allowed_cpus, parse_stat, PF_KTHREAD, PF_NO_SETAFFINITY};
use crate::sanitize::visible_bytes;

const CHECK: &str = "tasks";
const LIST_MAX: usize = 12;
const CMD_MAX: usize = 20;

#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub tgid: u32,
    pub tid: u32,
    /// Already made visible.
    pub comm: String,
    pub kthread: bool,
    pub no_setaffinity: bool,
    pub allowed: Vec<usize>,
    pub last_cpu: Option<usize>,
}

impl Thread {
    pub fn label(&self) -> String {
        format!("{}[{}]", self.comm, self.tid)
    }
}

pub(crate) fn scan(cx: &mut Ctx) -> Vec<Thread> {
    let self_pid = (cx.root.canonicalize().ok().as_deref() == Some(std::path::Path::new("/"))).then(std::process::id);
    let mut out = Vec::new();
    let mut hidden = 0;
    for p in cx.list_dir("proc") {
        let Ok(tgid) = p.parse::<u32>() else { continue };
        if Some(tgid) == self_pid {
            continue;
        }
        let tids: Vec<u32> = match std::fs::read_dir(cx.root.join(format!("proc/{tgid}/task"))) {
            Ok(rd) => rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
            Err(_) => vec![tgid],
        };
        for tid in tids {
            let base = if tid == tgid && !cx.exists(&format!("proc/{tgid}/task/{tid}")) {
                format!("proc/{tgid}")
            } else {
                format!("proc/{tgid}/task/{tid}")
            };
            // Threads come and go: a vanished one is skipped silently.
            let Some(st) = cx.read_quiet(&format!("{base}/stat")).and_then(|s| parse_stat(s.as_bytes())) else { continue };
            let Some(allowed) = cx.read_quiet(&format!("{base}/status")).as_deref().and_then(allowed_cpus) else {
                hidden += 1;
                continue;
            };
            out.push(Thread {
                tgid,
                tid,
                comm: visible_bytes(&st.comm),
                kthread: st.flags & PF_KTHREAD != 0,
                no_setaffinity: st.flags & PF_NO_SETAFFINITY != 0,
                allowed,
                last_cpu: st.last_cpu,
            });
        }
    }
    if hidden > 0 {
        cx.unreadable.push(format!("/proc/*/status of {hidden} threads: unreadable (hidepid or exited)"));
    }
    out.sort_by_key(|t| (t.tgid, t.tid));
    out
}

/// Returns the threads it scanned, for the checks that need them too.
pub(crate) fn check(cx: &mut Ctx) -> Vec<Thread> {
    let threads = scan(cx);
    if threads.is_empty() {
        return threads;
    }
    let hk = cx.hk_list();
    let w = cx.watched();
    let pinned = |t: &Thread| !t.allowed.is_empty() && t.allowed.iter().all(|c| cx.cpus.contains(c));
    let reaches = |t: &Thread| t.allowed.iter().any(|c| cx.cpus.contains(c));
    let ran = |t: &Thread| t.last_cpu.is_some_and(|c| cx.cpus.contains(&c));
    let labels = |v: &[&Thread]| v.iter().map(|t| t.label()).collect::<Vec<_>>();
    let workload_tgids: Vec<u32> = threads.iter().filter(|t| !t.kthread && pinned(t)).map(|t| t.tgid).collect();

    let percpu: Vec<&Thread> = threads.iter().filter(|t| t.kthread && pinned(t)).collect();
    let workload: Vec<&Thread> = threads.iter().filter(|t| !t.kthread && pinned(t)).collect();
    let kstray: Vec<&Thread> = threads.iter().filter(|t| t.kthread && !pinned(t) && reaches(t)).collect();
    let ustray: Vec<&Thread> = threads.iter().filter(|t| !t.kthread && !pinned(t) && reaches(t)).collect();
    let ran_here: Vec<&Thread> = threads.iter().filter(|t| !pinned(t) && ran(t)).collect();

    // Commands that move `ts` off the watched CPUs.
    let move_cmds = |ts: &[&Thread]| -> Option<String> {
        let hk = hk.as_ref()?;
        let mut cmds: Vec<String> = Vec::new();
        let mut by_proc: BTreeMap<u32, Vec<&Thread>> = BTreeMap::new();
        let mut wq = false;
        for t in ts {
            if t.kthread && t.no_setaffinity {
                wq |= t.comm.starts_with("kworker/");
                continue;
            }
            by_proc.entry(t.tgid).or_default().push(t);
        }
        for (tgid, ts) in by_proc {
            if ts[0].kthread || workload_tgids.contains(&tgid) {
                cmds.extend(ts.iter().map(|t| format!("taskset -pc {hk} {}", t.tid)));
            } else {
                cmds.push(format!("taskset -apc {hk} {tgid}"));
            }
        }
        let mut s = cmds.iter().take(CMD_MAX).cloned().collect::<Vec<_>>().join("; ");
        if cmds.len() > CMD_MAX {
            s.push_str(&format!("; ... ({} more)", cmds.len() - CMD_MAX));
        }
        if wq {
            if !s.is_empty() {
                s.push_str("; ");
            }
            s.push_str("kworkers follow the workqueue cpumask (see the workqueue findings)");
        }
        (!s.is_empty()).then_some(s)
    };

    if !percpu.is_empty() {
        let names = labels(&percpu);
        cx.push(
            finding(CHECK, "tasks:percpu_kthreads", Status::Info, format!("{} per-CPU kernel threads bound to {} (expected)", percpu.len(), Ctx::cpu_word(&cx.cpus)))
                .why("ksoftirqd/N, cpuhp/N, migration/N, kworker/N:x and friends exist on every CPU; they run only when given work there (jitterwatch names that work)")
                .ev(bounded(&names, 30)),
        );
    }
    if !workload.is_empty() {
        cx.push(
            finding(
                CHECK,
                "tasks:pinned",
                Status::Info,
                format!("{} user threads pinned to {} (your workload?)", workload.len(), Ctx::cpu_word(&cx.cpus)),
            )
            .why("threads whose affinity is only watched CPUs: expected if they are yours")
            .ev(bounded(&labels(&workload), LIST_MAX))
            .fact(super::Fact::Pinned(workload.iter().map(|t| t.tid).collect())),
        );
    }
    let f = if kstray.is_empty() {
        finding(CHECK, "tasks:kthreads", Status::Ok, format!("no unbound kernel thread may run on {}", Ctx::cpu_word(&cx.cpus)))
    } else {
        let fix = hk.as_ref().map(|hk| {
            format!("for p in 2 $(pgrep -P 2); do taskset -pc {hk} $p 2>/dev/null; done (kworker/u* and kworker/R-* follow the workqueue cpumask); lasting: boot with isolcpus=domain,managed_irq,{w}")
        });
        finding(
            CHECK,
            "tasks:kthreads",
            Status::Warn,
            format!("{} unbound kernel threads may run on {}", kstray.len(), Ctx::cpu_word(&cx.cpus)),
        )
        .ev(bounded(&labels(&kstray), LIST_MAX))
        .fix_opt(fix)
    };
    cx.push(f.why("kernel threads whose affinity includes a watched CPU (rcu_preempt, kswapd, kcompactd, unbound kworkers...) can be woken or balanced there"));
    let f = if ustray.is_empty() {
        finding(CHECK, "tasks:user", Status::Ok, format!("no other user thread may run on {}", Ctx::cpu_word(&cx.cpus)))
    } else {
        let procs = ustray.iter().map(|t| t.tgid).collect::<std::collections::BTreeSet<_>>().len();
        let fix = move_cmds(&ustray).map(|c| match &hk {
            Some(hk) => format!(
                "{c}; for new processes: CPUAffinity={} in /etc/systemd/system.conf, or boot with isolcpus=domain,{w}",
                hk.replace(',', " ")
            ),
            None => c,
        });
        finding(
            CHECK,
            "tasks:user",
            Status::Warn,
            format!("{} user threads in {procs} processes may run on {}", ustray.len(), Ctx::cpu_word(&cx.cpus)),
        )
        .ev(bounded(&labels(&ustray), LIST_MAX))
        .fix_opt(fix)
    };
    cx.push(
        f.why("any thread whose affinity includes a watched CPU can be scheduled there and preempt or share the CPU with the workload"),
    );
    let f = if ran_here.is_empty() {
        finding(CHECK, "tasks:ran", Status::Ok, format!("no unpinned thread last ran on {}", Ctx::cpu_word(&cx.cpus)))
    } else {
        let names: Vec<String> = ran_here.iter().map(|t| format!("{} (CPU {})", t.label(), t.last_cpu.unwrap_or(0))).collect();
        finding(CHECK, "tasks:ran", Status::Warn, format!("{} unpinned threads last ran on {}", ran_here.len(), Ctx::cpu_word(&cx.cpus)))
            .ev(bounded(&names, LIST_MAX))
            .fix_opt(move_cmds(&ran_here))
    };
    cx.push(f.why("the processor field of /proc/PID/task/TID/stat is the CPU each thread last ran on: these actually used a watched CPU"));
    threads
}

#[cfg(test)]
mod tests {
    use super::super::{audit, fixture::Fx, test_hints as hints, Status};
    #[test]
    fn tuned_tasks() {
        let fx = Fx::tuned();
        let r = audit(fx.path(), &[3]);
        assert_eq!(r.find("tasks:percpu_kthreads").unwrap().status, Status::Info);
        assert!(r.find("tasks:percpu_kthreads").unwrap().evidence[0].contains("ksoftirqd/3[30]"));
        assert_eq!(r.find("tasks:pinned").unwrap().status, Status::Info);
        for k in ["tasks:kthreads", "tasks:user", "tasks:ran"] {
            assert_eq!(r.find(k).unwrap().status, Status::Ok, "{k}");
        }
    }

    #[test]
    fn untuned_tasks_warn_and_escape_names() {
        let fx = Fx::untuned();
        let r = audit(fx.path(), &[1]);
        let k = r.find("tasks:kthreads").unwrap();
        assert_eq!(k.status, Status::Warn);
        assert!(k.evidence[0].contains("kthreadd[2]"));
        let u = r.find("tasks:user").unwrap();
        assert_eq!(u.status, Status::Warn);
        assert!(u.fix.as_deref().unwrap().contains("taskset -apc 0 1"));
        let ran = r.find("tasks:ran").unwrap();
        assert_eq!(ran.status, Status::Warn);
        let ev = ran.evidence.join(" ");
        assert!(ev.contains("evil\\x1b[2J\\x07[666] (CPU 1)"), "{ev}");
        assert!(!ev.contains('\x1b'));
        assert!(ran.fix.as_deref().unwrap().contains("taskset -apc 0 666"));
        assert!(ran.fix.as_deref().unwrap().contains("workqueue cpumask"), "{:?}", ran.fix);
        // Per-CPU kthreads are INFO, never WARN.
        let p = r.find("tasks:percpu_kthreads").unwrap();
        assert_eq!(p.status, Status::Info);
        assert!(p.evidence[0].contains("kworker/1:0[41]"));
        assert!(!ran.evidence[0].contains("ksoftirqd"));

        let mut out = Vec::new();
        super::super::run(fx.path(), &[1], false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains('\x1b') && !text.contains('\x07'));
        assert!(text.contains("evil\\x1b[2J\\x07[666]"), "{text}");

        let mut out = Vec::new();
        super::super::run(fx.path(), &[1], true, &mut out).unwrap();
        let json = String::from_utf8(out).unwrap();
        assert!(!json.contains('\x1b'));

        let h = hints(&r, "task", "evil\x1b[2J\x07[666]");
        assert!(h.iter().any(|l| l.contains("taskset -pc 0 666")), "{h:?}");
    }
}

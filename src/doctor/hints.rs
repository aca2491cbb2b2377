//! Links a culprit seen at run time (a typed `Cause`) to the audit
//! findings whose fixes would remove it. Both sides are read by their
//! fields: the cause's comm, pid, IRQ number or symbol, the findings' keys
//! and typed facts.

use super::{Fact, Finding, Report, Status};
use crate::cause::Cause;
use crate::cpulist::Display;
use crate::record::Vector;
use crate::sanitize::{visible, visible_bytes};

struct Hints<'a> {
    r: &'a Report,
    out: Vec<String>,
}

impl Hints<'_> {
    fn warn(&self, key: &str) -> Option<&Finding> {
        self.r.find(key).filter(|f| f.status == Status::Warn)
    }

    /// "{title}: {fix}" for `key` when it is a WARN with a fix.
    fn add(&mut self, key: &str) -> bool {
        let Some(f) = self.warn(key) else { return false };
        let line = match &f.fix {
            Some(fix) => format!("{}: {fix}", f.title),
            None => f.title.clone(),
        };
        self.push(line);
        true
    }

    /// Every WARN whose key starts with `prefix`.
    fn add_prefix(&mut self, prefix: &str) {
        let keys: Vec<String> =
            self.r.findings.iter().filter(|f| f.status == Status::Warn && f.key.starts_with(prefix)).map(|f| f.key.clone()).collect();
        for k in keys {
            self.add(&k);
        }
    }

    /// IRQ findings for interrupts delivered to a watched CPU now (the ones
    /// that raise softirqs there), busiest first, at most a few.
    fn add_delivered_irqs(&mut self) {
        const MAX: usize = 6;
        let mut hits: Vec<(u64, String)> = self
            .r
            .findings
            .iter()
            .filter(|f| f.status == Status::Warn)
            .filter_map(|f| match f.fact {
                Some(Fact::IrqDelivered { count, .. }) => Some((count, f.key.clone())),
                _ => None,
            })
            .collect();
        hits.sort_by_key(|h| std::cmp::Reverse(h.0));
        let keys: Vec<String> = hits.into_iter().map(|(_, k)| k).collect();
        for k in keys.iter().take(MAX) {
            self.add(k);
        }
        if keys.len() > MAX {
            self.push(format!("... and {} more IRQs delivered there (see jitterwatch doctor)", keys.len() - MAX));
        }
    }

    fn push(&mut self, s: impl Into<String>) {
        let s = s.into();
        if !self.out.contains(&s) {
            self.out.push(s);
        }
    }

    fn hk(&self) -> Option<String> {
        match &self.r.find("cpus")?.fact {
            Some(Fact::Housekeeping(hk)) if !hk.is_empty() => Some(Display(hk).to_string()),
            _ => None,
        }
    }

    fn pinned(&self, tid: u32) -> bool {
        self.r.find("tasks:pinned").is_some_and(|f| matches!(&f.fact, Some(Fact::Pinned(t)) if t.contains(&tid)))
    }

    fn cpus(&self) -> String {
        let c = &self.r.cpus;
        if c.len() == 1 {
            format!("CPU {}", c[0])
        } else {
            format!("CPUs {}", Display(c))
        }
    }
}

/// What an IPI asked the CPU for, by its vector or csd function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ipi {
    /// A TLB flush: another CPU changed mappings of a shared address space.
    TlbShootdown,
    /// The reschedule vector: a wake-up or preemption sent from elsewhere.
    Reschedule,
    /// A wake-up queued on this CPU's wake list (sched_ttwu_pending).
    WakeUp,
    /// The scheduler's idle load balancing kick.
    IdleBalance,
    /// membarrier(2) from a process with a thread here.
    Membarrier,
    /// perf reading, starting or stopping events on this CPU.
    Perf,
    CodePatch,
    RcuExpedited,
    FrequencyRead,
    IrqWork,
    Tick,
    /// A cross-CPU function call whose function is not known (the vector alone).
    FunctionCall,
    Other,
}

impl Ipi {
    fn of(name: &str) -> Self {
        let n = name;
        match n {
            "reschedule" => Ipi::Reschedule,
            "call_function" | "call_function_single" => Ipi::FunctionCall,
            _ if n.contains("flush_tlb")
                || n.contains("tlb_flush")
                || n.starts_with("do_kernel_range_flush")
                || n == "tlb_remove_table_smp_sync" =>
            {
                Ipi::TlbShootdown
            }
            _ if n.contains("ttwu") || n == "wake_up_if_idle" => Ipi::WakeUp,
            _ if n == "nohz_csd_func" || n.contains("kick_ilb") => Ipi::IdleBalance,
            _ if n.starts_with("ipi_mb") || n.starts_with("ipi_sync_") || n == "ipi_rseq" => Ipi::Membarrier,
            _ if n == "remote_function" || n.starts_with("perf_") || n.starts_with("__perf_") => Ipi::Perf,
            _ if n.contains("text_poke") || n == "do_sync_core" => Ipi::CodePatch,
            _ if n.contains("rcu_exp") => Ipi::RcuExpedited,
            _ if n.contains("aperfmperf") => Ipi::FrequencyRead,
            _ if n.contains("irq_work") => Ipi::IrqWork,
            _ if n.contains("nohz_full_kick") || n.contains("tick") => Ipi::Tick,
            _ => Ipi::Other,
        }
    }

    /// The IPI's vector or function name, for a cause that is an IPI.
    fn name(cause: &Cause) -> Option<String> {
        match cause {
            Cause::Vector(Vector::LocalTimer) => None,
            Cause::Vector(v) => Some(v.name().to_string()),
            Cause::Csd(f) => Some(f.to_string()),
            _ => None,
        }
    }
}

/// A hint from a cause's origin: `sender` (a program, escaped) sent `kind`
/// to `cpu` in `count` stalls. None for senders that are the CPU's own
/// interrupt-level code, and kinds without an origin. An IPI's hint does
/// not guess what the IPIs were: [`sender_hint_for`] says, given one.
pub fn sender_hint(kind: crate::cause::Kind, sender: &str, cpu: u32, count: u64) -> Option<String> {
    sender_hint_for(kind, sender, cpu, count, None)
}

/// [`sender_hint`], knowing what the sender sent (`what`, its top cause
/// there): an IPI's hint by its function.
pub fn sender_hint_for(kind: crate::cause::Kind, sender: &str, cpu: u32, count: u64, what: Option<&Cause>) -> Option<String> {
    use crate::cause::Kind;
    if sender.starts_with('(') {
        return None;
    }
    let off = format!("keep its threads off CPU {cpu} (taskset, cpusets)");
    Some(match kind {
        Kind::Ipi => {
            let sent = format!("{sender} sent IPIs to CPU {cpu} ({count} stalls)");
            match what.and_then(Ipi::name).map(|n| (Ipi::of(&n), n)) {
                Some((Ipi::TlbShootdown, _)) => format!(
                    "{sent}, TLB shootdowns: a process with a thread on CPU {cpu} turns every mprotect/munmap/madvise of its other threads into a TLB shootdown there; {off} or move those calls out of its hot path"
                ),
                Some((Ipi::Reschedule | Ipi::WakeUp, _)) => format!(
                    "{sent}, wake-ups: it woke tasks that run on CPU {cpu} (a futex, pipe, socket or eventfd they wait on); the workload's own when its threads hand work to each other, else change the woken tasks' affinity"
                ),
                Some((Ipi::Membarrier, _)) => format!(
                    "{sent}, membarrier(2): it calls membarrier (JIT runtimes, userspace RCU), which interrupts every CPU running its threads; {off}"
                ),
                Some((Ipi::Perf, _)) => format!("{sent}: perf work (a profiler reading or switching events there); stop the profiler while measuring"),
                Some((Ipi::CodePatch, _)) => format!("{sent}: kernel code patching (module load, BPF attach, ftrace, static keys); avoid it while measuring"),
                Some((_, n)) => format!("{sent}, cross-CPU calls to {}: {off} if they need not run there", visible(&n)),
                None => format!(
                    "{sent}: their function names the fix (flush_tlb_func: a TLB shootdown; reschedule: a wake-up); {off} if they need not run there"
                ),
            }
        }
        Kind::Work => format!(
            "{sender} queued work on CPU {cpu} ({count} stalls): per-CPU work goes where its caller sends it (schedule_on_each_cpu, sysctl writes, lru_add_drain_all), which workqueue cpumasks do not stop; stop the caller during the latency-critical window"
        ),
        Kind::Task => format!(
            "{sender} woke tasks on CPU {cpu} ({count} stalls): the woken tasks run there; if they should not, change their affinity (taskset -p, cpusets)"
        ),
        _ => return None,
    })
}

/// One-line hints for a run-time cause.
pub fn hints(report: &Report, cause: &Cause) -> Vec<String> {
    let mut h = Hints { r: report, out: Vec::new() };
    match cause {
        Cause::Irq { irq, .. } => irq_line(&mut h, *irq),
        Cause::Vector(Vector::LocalTimer) => {
            h.add("nohz_full");
            h.push("local timer: the tick, or an hrtimer armed on that CPU (jitterwatch names the timer function)");
        }
        Cause::Vector(v) => ipi(&mut h, v.name()),
        Cause::Csd(f) => ipi(&mut h, f),
        Cause::Softirq(v) => softirq(&mut h, &crate::names::softirq(*v)),
        Cause::Work(f) => work(&mut h, f),
        Cause::Task { comm, pid } => task(&mut h, &visible_bytes(comm), *pid),
        Cause::Timer(f) => timer(&mut h, f),
        Cause::Nmi(_) => {
            h.add("watchdog");
            h.push("NMIs also come from perf sampling (perf record/top with hardware events) on that CPU");
        }
        Cause::Unexplained => {
            if let Some(f) = report.find("hypervisor").filter(|f| f.status == Status::Info) {
                h.push(format!(
                    "{}: host pauses (vCPU preemption, VM exits) are invisible to the guest; only dedicated, pinned host cores remove them",
                    f.title
                ));
            } else {
                h.push("no hypervisor detected: unexplained time is SMIs (firmware), hardware, or kernel activity without a traced event");
            }
            h.add("steal");
        }
        Cause::Lost => h.push(
            "lost: events were dropped because the ring buffer was full (jitterwatch's consumer fell behind, e.g. starved on a busy housekeeping CPU): give it a CPU of its own",
        ),
        Cause::Idle(state) => {
            h.push(format!(
                "idle ({}): the CPU slept and had to wake; idle=poll or processor.max_cstate=0 intel_idle.max_cstate=0 keep it awake (at a power cost)",
                visible(state)
            ));
            h.add("rt_throttling");
            h.add("fair_server");
        }
        Cause::Slack => h.push(
            "timer slack lets the kernel fire a sleeper's timer late: SCHED_FIFO threads have none; others can set it with prctl(PR_SET_TIMERSLACK, 1)",
        ),
        Cause::Host => {
            h.push("host: the hypervisor ran something else while this vCPU was runnable (its steal clock says so): dedicated host cores with the vCPUs pinned 1:1, or a less loaded host");
            h.add("steal");
        }
        Cause::Smi => h.push(
            "smi: the firmware took the CPU (System Management Mode): in the BIOS, turn off what uses SMIs (legacy USB emulation, OS-visible power management left to the firmware, error reporting by SMI, iLO/iDRAC polling); `turbostat --show SMI` counts them",
        ),
        Cause::Others(_) => {}
    }
    h.out
}

fn irq_line(h: &mut Hints, n: i32) {
    let key = format!("irq:{n}");
    match h.warn(&key).cloned() {
        Some(f) => match f.fix {
            Some(fix) if fix.contains("managed") => h.push(format!("irq {n} is kernel-managed and reaches {}: {fix}", h.cpus())),
            Some(fix) => h.push(format!("irq {n} has {} in its affinity: {fix}", h.cpus())),
            None => h.push(f.title),
        },
        None => h.push(format!("irq {n} is not in the audit's warnings: its affinity was changed since, or irqbalance moves it")),
    }
    h.add("irqbalance");
}

fn softirq(h: &mut Hints, name: &str) {
    match name {
        "TIMER" | "HRTIMER" => {
            h.add("nohz_full");
            h.add("timer_migration");
        }
        "RCU" => {
            h.add("rcu_nocbs");
        }
        "SCHED" => {
            h.add("isolcpus");
            h.add("nohz_full");
        }
        "NET_RX" | "NET_TX" | "BLOCK" | "IRQ_POLL" | "TASKLET" | "HI" => {
            h.add_delivered_irqs();
            if name.starts_with("NET") {
                h.push("packet steering also queues network softirqs: check /sys/class/net/*/queues/rx-*/rps_cpus and tx-*/xps_cpus exclude the watched CPUs");
            }
        }
        _ => {}
    }
}

fn work(h: &mut Hints, name: &str) {
    match name {
        "vmstat_update" | "refresh_vm_stats" | "vmstat_shepherd" => {
            // Per-CPU work on mm_percpu_wq: workqueue cpumasks do not apply.
            h.add("stat_interval");
            h.add("nohz_full");
            return;
        }
        "wb_workfn" => {
            h.add("workqueue:writeback");
        }
        "lru_add_drain_per_cpu" | "drain_local_pages_wq" => {
            h.push(format!(
                "{name}: another CPU drains per-CPU page lists on every CPU (mlock, page migration, compaction, memory pressure)"
            ));
            h.add("thp");
            h.add("numa_balancing");
        }
        "psi_avgs_work" => h.push("psi_avgs_work: pressure-stall averaging every 2 s; boot with psi=0 if /proc/pressure is unused"),
        n if n.contains("rcu") => {
            h.add("rcu_nocbs");
        }
        n => {
            if n.starts_with("blk_") {
                h.add_delivered_irqs();
            }
            h.push(format!(
                "{}: unbound work follows the workqueue cpumasks; per-CPU work is queued by code running on, or targeting, that CPU",
                visible(n)
            ));
        }
    }
    h.add("workqueue:cpumask");
    h.add_prefix("workqueue:");
}

/// `comm` as shown (escaped); `pid` None for a program's folded tasks.
fn task(h: &mut Hints, comm: &str, pid: Option<u32>) {
    let base = comm.split('/').next().unwrap_or(comm);
    match base {
        "swapper" => {
            h.push(format!("{comm} went idle: the workload blocked, or was parked by RT throttling or the fair server"));
            h.add("rt_throttling");
            h.add("fair_server");
        }
        "kworker" => {
            let unbound = comm.starts_with("kworker/u") || comm.starts_with("kworker/R-");
            if unbound {
                h.add("workqueue:cpumask");
                h.add_prefix("workqueue:");
            } else {
                h.push("per-CPU kworker: the work function names the cause (the work view of jitterwatch)");
                h.add("stat_interval");
                h.add("workqueue:cpumask");
            }
        }
        "ksoftirqd" => {
            h.push("softirqs overflowed to ksoftirqd: usually network or block IRQs delivered to that CPU");
            h.add_delivered_irqs();
        }
        "migration" => {
            h.push("the stopper thread: softlockup watchdog checks, task migration (load balancing), stop_machine");
            h.add("watchdog");
            h.add("isolcpus");
        }
        "rcuc" | "rcu_preempt" | "rcu_sched" | "rcuop" | "rcuog" | "rcuos" => {
            h.add("rcu_nocbs");
            h.add("tasks:kthreads");
        }
        "cpuhp" => h.push("CPU hotplug thread: a CPU went on- or offline"),
        "khugepaged" => {
            h.add("thp");
        }
        "ksmd" => {
            h.add("ksm");
        }
        "irqbalance" => {
            h.add("irqbalance");
        }
        _ => {}
    }
    // kworkers cannot be re-pinned (PF_NO_SETAFFINITY); per-CPU threads must stay.
    let percpu = ["kworker", "ksoftirqd", "migration", "cpuhp", "rcuc", "swapper", "idle_inject"].contains(&base);
    if let (Some(pid), false) = (pid, percpu) {
        let label = format!("{comm}[{pid}]");
        if h.pinned(pid) {
            h.push(format!("{label} is pinned to the watched CPUs: part of your workload, or pin it elsewhere"));
        } else if pid != 0 {
            if let Some(hk) = h.hk() {
                h.push(format!("{label} may run on {}: taskset -pc {hk} {pid}", h.cpus()));
            }
            h.add("isolcpus");
        }
    }
}

fn timer(h: &mut Hints, name: &str) {
    match name {
        "sched_rt_period_timer" => {
            h.add("rt_throttling");
            h.add("fair_server");
        }
        "tick_nohz_handler" | "tick_sched_timer" | "tick_nohz_highres_handler" | "tick_handle_periodic" => {
            h.add("nohz_full");
        }
        "watchdog_timer_fn" => {
            h.add("watchdog");
        }
        "dl_server_timer" | "dl_task_timer" | "inactive_task_timer" => {
            h.add("fair_server");
        }
        "hrtimer_wakeup" | "it_real_fn" | "posix_timer_fn" | "timerfd_tmrproc" | "alarmtimer_fired" => {
            h.push(format!("{name}: a timer armed by a task on that CPU (a sleep, timerfd, POSIX timer): the workload's own, or a task that should not be there"));
            h.add("tasks:user");
        }
        "perf_mux_hrtimer_handler" | "perf_swevent_hrtimer" => h.push("perf is running on that CPU (counter multiplexing or sampling)"),
        "clocksource_watchdog" => {
            h.push("clocksource watchdog: boot with tsc=reliable when the TSC is constant and nonstop");
        }
        "delayed_work_timer_fn" | "process_timeout" => {
            h.add("timer_migration");
            h.add("workqueue:cpumask");
        }
        _ => {
            h.add("timer_migration");
        }
    }
}

fn ipi(h: &mut Hints, name: &str) {
    match Ipi::of(name) {
        Ipi::Reschedule => {
            h.push("reschedule IPI: another CPU woke a task onto this one, asked it to preempt, or kicked it for a nohz_full tick");
            h.add("tasks:user");
            h.add("tasks:kthreads");
        }
        Ipi::WakeUp => {
            h.push(format!(
                "remote wake-up ({}): another CPU queued the wake-up of a task that runs here; the workload's own when its threads hand work to each other",
                visible(name)
            ));
            h.add("tasks:user");
        }
        Ipi::TlbShootdown => {
            h.push("TLB shootdown: a thread sharing the workload's address space (or the kernel) changed mappings elsewhere (munmap, mprotect, madvise, page migration)");
            h.add("thp");
            h.add("ksm");
            h.add("numa_balancing");
        }
        Ipi::IdleBalance => {
            h.push("idle load balancing kick: the scheduler asked this CPU to balance load for idle CPUs; isolcpus (domain) keeps it out of balancing");
            h.add("isolcpus");
        }
        Ipi::Membarrier => h.push(
            "membarrier(2): a process with a thread on this CPU called membarrier (JIT runtimes, userspace RCU), which interrupts every CPU running its threads",
        ),
        Ipi::Perf => h.push("perf: a profiler read, started or stopped events on this CPU (a cross-CPU call); stop it while measuring"),
        Ipi::CodePatch => h.push("kernel code patching (module load, BPF attach, ftrace, static keys): avoid it while measuring"),
        Ipi::RcuExpedited => h.push("expedited RCU grace period: boot with rcupdate.rcu_normal_after_boot=1 to avoid the IPIs"),
        Ipi::FrequencyRead => {
            h.push("reading CPU frequency (/proc/cpuinfo 'cpu MHz', turbostat) sampled every CPU: stop the tool that polls it")
        }
        Ipi::IrqWork => h.push("irq_work: perf, printk or a BPF ring buffer submitted without BPF_RB_NO_WAKEUP"),
        Ipi::Tick => {
            h.add("nohz_full");
        }
        Ipi::FunctionCall => h.push(format!(
            "{}: a cross-CPU function call sent from another CPU (with the csd tracepoints, jitterwatch names its function)",
            visible(name)
        )),
        Ipi::Other => h.push(format!("{}: a cross-CPU function call sent from another CPU (the csd function names it)", visible(name))),
    }
}

#[cfg(test)]
mod sender_tests {
    use super::*;
    use crate::cause::Kind;

    /// Each IPI by its function: a TLB shootdown only for a flush.
    #[test]
    fn ipis_are_named_by_their_function() {
        let cases = [
            ("flush_tlb_func", Ipi::TlbShootdown),
            ("do_kernel_range_flush", Ipi::TlbShootdown),
            ("tlb_remove_table_smp_sync", Ipi::TlbShootdown),
            ("reschedule", Ipi::Reschedule),
            ("sched_ttwu_pending", Ipi::WakeUp),
            ("nohz_csd_func", Ipi::IdleBalance),
            ("ipi_mb", Ipi::Membarrier),
            ("ipi_sync_rq_state", Ipi::Membarrier),
            ("remote_function", Ipi::Perf),
            ("do_sync_core", Ipi::CodePatch),
            ("rcu_exp_handler", Ipi::RcuExpedited),
            ("aperfmperf_snapshot_cpu", Ipi::FrequencyRead),
            ("irq_work", Ipi::IrqWork),
            ("nohz_full_kick_func", Ipi::Tick),
            ("call_function_single", Ipi::FunctionCall),
            ("do_nothing", Ipi::Other),
        ];
        for (name, want) in cases {
            assert_eq!(Ipi::of(name), want, "{name}");
        }
    }

    fn report() -> Report {
        Report { cpus: vec![6], findings: vec![], unreadable: vec![] }
    }

    /// The hint for an IPI cause: TLB words only for a flush.
    #[test]
    fn an_ipi_s_hint_says_what_it_was() {
        let hint = |c: Cause| hints(&report(), &c).join(" | ");
        let tlb = hint(Cause::Csd("flush_tlb_func".into()));
        assert!(tlb.starts_with("TLB shootdown:"), "{tlb}");
        for (c, words) in [
            (Cause::Vector(Vector::Reschedule), "reschedule IPI: another CPU woke a task onto this one"),
            (Cause::Csd("sched_ttwu_pending".into()), "remote wake-up (sched_ttwu_pending)"),
            (Cause::Csd("nohz_csd_func".into()), "idle load balancing kick"),
            (Cause::Csd("ipi_mb".into()), "membarrier(2)"),
            (Cause::Vector(Vector::CallFunctionSingle), "call_function_single: a cross-CPU function call"),
            (Cause::Csd("do_nothing".into()), "do_nothing: a cross-CPU function call"),
        ] {
            let h = hint(c);
            assert!(h.contains(words) && !h.contains("TLB"), "{h}");
        }
    }

    /// A sender's IPI hint by what it sent, and no guess without it.
    #[test]
    fn an_ipi_sender_s_hint_says_what_it_sent() {
        let for_ = |c: Option<Cause>| sender_hint_for(Kind::Ipi, "redis-benchmark", 1, 7, c.as_ref()).unwrap();
        let tlb = for_(Some(Cause::Csd("flush_tlb_func".into())));
        assert!(tlb.starts_with("redis-benchmark sent IPIs to CPU 1 (7 stalls), TLB shootdowns:"), "{tlb}");
        for c in [Cause::Vector(Vector::Reschedule), Cause::Csd("sched_ttwu_pending".into())] {
            let h = for_(Some(c));
            assert!(h.contains("(7 stalls), wake-ups: it woke tasks that run on CPU 1") && !h.contains("TLB"), "{h}");
        }
        let h = for_(Some(Cause::Csd("ipi_mb".into())));
        assert!(h.contains("membarrier") && !h.contains("TLB shootdowns:"), "{h}");
        let h = for_(Some(Cause::Csd("do_nothing".into())));
        assert!(h.contains("cross-CPU calls to do_nothing") && !h.contains("TLB"), "{h}");
        let h = for_(None);
        assert!(h.contains("their function names the fix") && !h.contains("TLB shootdowns:"), "{h}");
        assert_eq!(sender_hint(Kind::Ipi, "java", 6, 12), sender_hint_for(Kind::Ipi, "java", 6, 12, None));
    }

    #[test]
    fn senders_get_the_fix_for_what_they_sent() {
        assert!(sender_hint_for(Kind::Ipi, "java", 6, 12, Some(&Cause::Csd("flush_tlb_func".into()))).unwrap().contains("TLB shootdown"));
        assert!(sender_hint(Kind::Work, "sh", 6, 1).unwrap().contains("schedule_on_each_cpu"));
        assert!(sender_hint(Kind::Task, "bash", 6, 3).unwrap().contains("affinity"));
        assert_eq!(sender_hint(Kind::Work, "(softirq:TIMER)", 6, 3), None, "the CPU's own code has no sender to fix");
        assert_eq!(sender_hint(Kind::Irq, "x", 6, 3), None);
    }
}

//! Hints for what interrupted the CPU: a device IRQ, a softirq, a timer,
//! an IPI. These run wherever their interrupt is delivered, so the fix is
//! the interrupt's affinity or the boot parameter that stops it coming
//! (nohz_full for the tick, rcu_nocbs for RCU's softirq); an IPI is named
//! by what it asked for (`Ipi`), which also says who could have sent it.

use super::Hints;
use crate::cause::Cause;
use crate::record::Vector;
use crate::sanitize::visible;

/// What an IPI asked the CPU for, by its vector or csd function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ipi {
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
    pub(super) fn of(name: &str) -> Self {
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
    pub(super) fn name(cause: &Cause) -> Option<String> {
        match cause {
            Cause::Vector(Vector::LocalTimer) => None,
            Cause::Vector(v) => Some(v.name().to_string()),
            Cause::Csd(f) => Some(f.to_string()),
            _ => None,
        }
    }
}

/// Whether an IRQ's action name is the tick's: arm64's architected timer
/// (`arch_timer`, a per-CPU IRQ; x86's tick is the local-timer vector).
pub(super) fn is_tick_irq(name: &[u8]) -> bool {
    name == b"arch_timer"
}

pub(super) fn irq_line(h: &mut Hints, n: i32) {
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

pub(super) fn softirq(h: &mut Hints, name: &str) {
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

pub(super) fn timer(h: &mut Hints, name: &str) {
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

pub(super) fn ipi(h: &mut Hints, name: &str) {
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
mod tests {
    use super::super::{hints_for, Report};
    use super::*;

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
        let hint = |c: Cause| hints_for(&report(), &c, true).join(" | ");
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

    /// arm64's tick is an IRQ: it gets the tick's advice, not an IRQ's.
    #[test]
    fn arm64s_timer_irq_is_the_tick() {
        let hint = |c: Cause| hints_for(&report(), &c, true).join(" | ");
        let arm = hint(Cause::Irq { irq: 11, name: std::sync::Arc::from(&b"arch_timer"[..]) });
        assert!(arm.starts_with("arch_timer: the tick (arm64's") && !arm.contains("affinity"), "{arm}");
        let dev = hint(Cause::Irq { irq: 11, name: std::sync::Arc::from(&b"arch_timer2"[..]) });
        assert!(dev.starts_with("irq 11 "), "only the timer's own name is the tick: {dev}");
    }
}

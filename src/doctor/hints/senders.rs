//! Hints for a cause's origin: the program on another CPU that sent the
//! IPIs, queued the work or woke the tasks (origins.md). The fix is on the
//! sender's side (keep it off the CPU, or stop the call), so these read
//! only what was sent, never the audit.

use super::interrupts::Ipi;
use crate::cause::Cause;
use crate::sanitize::visible;

/// A hint from a cause's origin: `sender` (a program, escaped) sent `kind`
/// to `cpu` in `count` stalls; `what`: what it sent that cost the most (an
/// IPI's hint is by its function, and guesses nothing without one). None
/// for senders that are the CPU's own interrupt-level code, and kinds
/// without an origin.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Kind;
    use crate::record::Vector;

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
    }

    #[test]
    fn senders_get_the_fix_for_what_they_sent() {
        assert!(sender_hint_for(Kind::Ipi, "java", 6, 12, Some(&Cause::Csd("flush_tlb_func".into()))).unwrap().contains("TLB shootdown"));
        assert!(sender_hint_for(Kind::Work, "sh", 6, 1, None).unwrap().contains("schedule_on_each_cpu"));
        assert!(sender_hint_for(Kind::Task, "bash", 6, 3, None).unwrap().contains("affinity"));
        assert_eq!(sender_hint_for(Kind::Work, "(softirq:TIMER)", 6, 3, None), None, "the CPU's own code has no sender to fix");
        assert_eq!(sender_hint_for(Kind::Irq, "x", 6, 3, None), None);
    }
}

//! What the BPF side attaches to, and what it asks the kernel's BTF about
//! it: pure tables and lookups, apart from the loading itself.

use libbpf_rs::btf::types::{Enum, FuncProto, Ptr, Typedef};
use libbpf_rs::btf::Btf;
use libbpf_rs::btf::ReferencesType;

/// The tracepoints, by the program that attaches each. All but sched_switch
/// are optional: a kernel without one gets a notice, not a failure.
pub(super) const TRACEPOINTS: &[(&str, &str)] = &[
    ("on_irq_entry", "irq_handler_entry"),
    ("on_irq_exit", "irq_handler_exit"),
    ("on_softirq_entry", "softirq_entry"),
    ("on_softirq_exit", "softirq_exit"),
    ("on_work_start", "workqueue_execute_start"),
    ("on_work_end", "workqueue_execute_end"),
    ("on_hrtimer_entry", "hrtimer_expire_entry"),
    ("on_hrtimer_exit", "hrtimer_expire_exit"),
    ("on_local_timer_entry", "local_timer_entry"),
    ("on_local_timer_exit", "local_timer_exit"),
    ("on_reschedule_entry", "reschedule_entry"),
    ("on_reschedule_exit", "reschedule_exit"),
    ("on_call_function_entry", "call_function_entry"),
    ("on_call_function_exit", "call_function_exit"),
    ("on_call_function_single_entry", "call_function_single_entry"),
    ("on_call_function_single_exit", "call_function_single_exit"),
    ("on_irq_work_entry", "irq_work_entry"),
    ("on_irq_work_exit", "irq_work_exit"),
    ("on_csd_entry", "csd_function_entry"),
    ("on_csd_exit", "csd_function_exit"),
    ("on_nmi", "nmi_handler"),
    ("on_cpu_idle", "cpu_idle"),
    ("on_cpu_frequency", "cpu_frequency"),
    ("on_tick_stop", "tick_stop"),
    // arm64's IPIs by their reason (bpf/arm64.bpf.h: no such programs in
    // the x86 object).
    ("on_ipi_entry", "ipi_entry"),
    ("on_ipi_exit", "ipi_exit"),
];

/// x86's own tracepoints (irq_vectors, its NMI handler): arm64 has none of
/// them, its tick being the arch_timer IRQ and its IPIs IRQs too
/// (ipi_entry says which), so there they are not something the kernel
/// lacks. `arch` as std::env::consts::ARCH says it.
pub fn applies(tp: &str, arch: &str) -> bool {
    const X86_ONLY: &[&str] = &[
        "local_timer_entry",
        "local_timer_exit",
        "reschedule_entry",
        "reschedule_exit",
        "call_function_entry",
        "call_function_exit",
        "call_function_single_entry",
        "call_function_single_exit",
        "irq_work_entry",
        "irq_work_exit",
        "nmi_handler",
    ];
    arch == "x86_64" || !X86_ONLY.contains(&tp)
}

/// The origin programs (who sent an IPI, queued work, woke a task, from any
/// CPU): loaded unless `--no-origins`, each optional; `on_waking` (every
/// wake-up of every CPU) only with `--wake-origins`. The IPI send and
/// csd_queue_cpu tracepoints came with Linux 6.3.
pub(super) const ORIGIN_TRACEPOINTS: &[(&str, &str)] = &[
    ("on_ipi_send_cpu", "ipi_send_cpu"),
    ("on_ipi_send_cpumask", "ipi_send_cpumask"),
    ("on_csd_queue", "csd_queue_cpu"),
    ("on_queue_work", "workqueue_queue_work"),
    ("on_waking", "sched_waking"),
    // arm64 before 6.3: reschedule IPIs' senders, where the two above
    // are missing (bpf/arm64.bpf.h).
    ("on_ipi_raise", "ipi_raise"),
];

/// Whether `tp` is one of the origin programs' tracepoints (the screen
/// names the missing ones where no sender shows).
pub fn is_origin_tracepoint(tp: &str) -> bool {
    ORIGIN_TRACEPOINTS.iter().any(|&(_, t)| t == tp)
}

/// The arguments of tracepoint `tp`'s BTF prototype (without the leading
/// `void *__data`), None when the kernel's BTF does not say.
pub(super) fn tracepoint_args(btf: &Btf, tp: &str) -> Option<usize> {
    let td = btf.type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))?;
    let ptr = Ptr::try_from(td.referenced_type().skip_mods_and_typedefs()).ok()?;
    let proto = FuncProto::try_from(ptr.referenced_type().skip_mods_and_typedefs()).ok()?;
    Some(proto.len().saturating_sub(1))
}

/// Whether the kernel knows BPF helper `name` (a BPF_FUNC_* of its enum bpf_func_id).
pub(super) fn has_helper(btf: &Btf, name: &str) -> bool {
    btf.type_by_name::<Enum<'_>>("bpf_func_id").is_some_and(|e| e.iter().any(|m| m.name.is_some_and(|n| n == name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86s_vectors_are_missing_on_x86_only() {
        for tp in ["local_timer_entry", "reschedule_exit", "irq_work_entry", "nmi_handler"] {
            assert!(applies(tp, "x86_64"), "{tp}");
            assert!(!applies(tp, "aarch64"), "{tp}: arm64 has no such tracepoint to lack");
        }
        for tp in ["irq_handler_entry", "ipi_entry", "csd_function_entry", "tick_stop"] {
            assert!(applies(tp, "aarch64") && applies(tp, "x86_64"), "{tp}");
        }
        // Every x86-only name is one of the programs' tracepoints.
        assert_eq!(TRACEPOINTS.iter().filter(|(_, tp)| !applies(tp, "aarch64")).count(), 11);
    }
}

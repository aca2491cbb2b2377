// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): the programs only
 * arm64 has, included last and wholly under __TARGET_ARCH_arm64, so that
 * the x86 object stays byte for byte what it was (its line information
 * names every line before this one).
 */
#ifndef JITTERWATCH_ARM64_BPF_H
#define JITTERWATCH_ARM64_BPF_H

#include "batch.bpf.h"

#if defined(__TARGET_ARCH_arm64)
/*
 * arm64's IPIs. Each is an IRQ of its own, its action named "IPI" (irq_handler_entry/exit above), and inside it
 * ipi_entry/ipi_exit say why, as a string of the kernel's ipi_types[]:
 * "Rescheduling interrupts", "Function call interrupts", "IRQ work
 * interrupts", "Timer broadcast interrupts", "CPU stop ...", "CPU
 * backtrace ...", "KGDB roundup ...". The three x86 has vectors for become
 * those vectors, nested in the IPI's IRQ (userspace counts the IRQ once);
 * the others stay the IRQ's. Its first letter tells them apart.
 */
static __always_inline __u8 ipi_vector(const char *reason)
{
	char c = 0;

	bpf_probe_read_kernel(&c, sizeof(c), reason);
	switch (c) {
	case 'R':
		return JW_VEC_RESCHEDULE;
	case 'F':
		return JW_VEC_CALL_FUNCTION;
	case 'I':
		return JW_VEC_IRQ_WORK;
	}
	return 0;
}

SEC("?tp_btf/ipi_entry")
int BPF_PROG(on_ipi_entry, const char *reason)
{
	__u8 vec;

	if (!watched_here())
		return 0;
	vec = ipi_vector(reason);
	return vec ? batched(JW_VECTOR_ENTRY, vec, 0, 0, JW_ENTER) : 0;
}

SEC("?tp_btf/ipi_exit")
int BPF_PROG(on_ipi_exit, const char *reason)
{
	__u8 vec;

	if (!watched_here())
		return 0;
	vec = ipi_vector(reason);
	return vec ? batched(JW_VECTOR_EXIT, vec, 0, 0, JW_LEAVE) : 0;
}

/*
 * Who sent a reschedule IPI to a watched CPU, before Linux 6.3 (from 6.3
 * the generic ipi_send_cpu/ipi_send_cpumask of origins.bpf.h say it, and
 * src/bpf.rs loads this only where they are missing: both fire for one
 * send). ipi_raise runs in the sender's context with the target mask and
 * the reason; a reschedule has no callback, which is how its origin is
 * found (src/engine/origins.rs), so the others, whose callback this does
 * not know, are not sent. The loop is on_ipi_send_cpumask's: written
 * again rather than shared, as moving it out of origins.bpf.h would change
 * the x86 object's line information.
 */
SEC("?tp_btf/ipi_raise")
int BPF_PROG(on_ipi_raise, const struct cpumask *mask, const char *reason)
{
	__u64 bits = (__u64)mask;
	__u32 i, n = watched_n;

	if (ipi_vector(reason) != JW_VEC_RESCHEDULE)
		return 0;
	for (i = 0; i < JW_MAX_LISTED && i < n; i++) {
		__u32 c = watched_list[i];
		__u64 word = 0;

		if (c >= JW_MAX_CPUS)
			break;
		if (bpf_probe_read_kernel(&word, sizeof(word), (void *)(bits + (c / 64) * 8)))
			continue;
		if (word & (1ULL << (c % 64)))
			origin(c, JW_ORIGIN_IPI, 0, 0, 0);
	}
	return 0;
}
#endif

#endif /* JITTERWATCH_ARM64_BPF_H */

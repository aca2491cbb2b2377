// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): current_syscall(),
 * the system call the current task is in, read from the pt_regs its entry
 * from user mode saved at the top of its kernel stack. Where those are and
 * what names the call differ per architecture (build.rs passes
 * -D__TARGET_ARCH_x86 or -D__TARGET_ARCH_arm64).
 */
#ifndef JITTERWATCH_ARCH_BPF_H
#define JITTERWATCH_ARCH_BPF_H

#include "common.bpf.h"

#define JW_PF_KTHREAD 0x00200000

/*
 * Where the kernel has bpf_task_pt_regs (5.15+; bpf_get_current_task_btf
 * came before it), the task's flags and its saved registers are typed
 * pointers: plain loads, no probe-read helper. Three probe reads were most
 * of what a softirq's entry program cost (523 of its 155 + 368 ns with
 * BPF stats on our VM, the early return 155). Sets *nr and returns 1, or
 * returns 0 where the helpers are missing and the caller probe-reads.
 */
#define JW_TYPED_SYSCALL(field, nr)                                                   \
	({                                                                            \
		int typed_ = 0;                                                       \
		if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) { \
			struct task_struct *t_ = bpf_get_current_task_btf();          \
			typed_ = 1;                                                   \
			if (t_->flags & JW_PF_KTHREAD)                                \
				*(nr) = -1;                                           \
			else                                                          \
				*(nr) = ((struct pt_regs *)bpf_task_pt_regs(t_))->field; \
		}                                                                     \
		typed_;                                                               \
	})

#if defined(__TARGET_ARCH_arm64)

/*
 * arm64's kernel stacks: THREAD_SIZE is 16 KiB with 4 KiB pages (Debian's
 * kernels) and with 16 KiB pages; VMAP_STACK aligns them to twice that but
 * keeps the size. 64 KiB pages or KASAN make them larger: not handled.
 */
#define JW_THREAD_SIZE (4096 << 2)

/*
 * The current task's system call, if it is in one (see struct jw_softirq).
 * task_pt_regs() is the struct pt_regs just below the stack's top, and that
 * struct's size has changed across kernel versions: it is the running
 * kernel's (CO-RE), not vmlinux.h's. Every entry from user mode other than
 * svc stores NO_SYSCALL (-1) in syscallno, so an interrupted user loop
 * reads -1 as on x86.
 */
static __always_inline __s64 current_syscall(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct pt_regs *regs;
	int syscallno = -1;
	__s64 nr;

	if (JW_TYPED_SYSCALL(syscallno, &nr))
		return nr;
	if (BPF_CORE_READ(t, flags) & JW_PF_KTHREAD)
		return -1;
	regs = (struct pt_regs *)((char *)BPF_CORE_READ(t, stack) + JW_THREAD_SIZE -
				  bpf_core_type_size(struct pt_regs));
	if (bpf_probe_read_kernel(&syscallno, sizeof(syscallno), &regs->syscallno))
		return -1;
	return syscallno;
}

#else

/* x86_64's kernel stacks: 16 KiB, the pt_regs of the user entry at the top. */
#define JW_THREAD_SIZE (4096 << 2)

/*
 * The current task's system call, if it is in one (see struct jw_softirq).
 * CO-RE reads through bpf_get_current_task, so 5.10 runs it too.
 */
static __always_inline __s64 current_syscall(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct pt_regs *regs;
	long orig_ax = -1;
	__s64 nr;

	if (JW_TYPED_SYSCALL(orig_ax, &nr))
		return nr;
	if (BPF_CORE_READ(t, flags) & JW_PF_KTHREAD)
		return -1;
	regs = (struct pt_regs *)((char *)BPF_CORE_READ(t, stack) + JW_THREAD_SIZE) - 1;
	if (bpf_probe_read_kernel(&orig_ax, sizeof(orig_ax), &regs->orig_ax))
		return -1;
	return orig_ax;
}

#endif

#endif /* JITTERWATCH_ARCH_BPF_H */

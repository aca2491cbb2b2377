// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Kernel side of jitterwatch: one tp_btf program per tracepoint, each
 * filtered to the watched CPUs. The events of an interruption go into the
 * CPU's batch, written as one record when it ends (batch.bpf.h); context
 * switches, NMIs and what other CPUs do to a watched one are jw_events.
 */
#include "common.bpf.h"
#include "record.bpf.h"
#include "steal.bpf.h"
#include "batch.bpf.h"
#include "switch.bpf.h"
#include "arch.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("?tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq, struct irqaction *action)
{
	if (!watched_here())
		return 0;
	name_irq(irq, action);
	return batched(JW_IRQ_ENTRY, 0, irq, 0, JW_ENTER);
}

SEC("?tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq, struct irqaction *action, int ret)
{
	return batched(JW_IRQ_EXIT, 0, irq, ret, JW_LEAVE);
}

SEC("?tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	if (!watched_here())
		return 0;
	return batched(JW_SOFTIRQ_ENTRY, vec, current_syscall(), 0, JW_ENTER);
}

SEC("?tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	return batched(JW_SOFTIRQ_EXIT, vec, 0, 0, JW_LEAVE);
}

/*
 * Set by userspace where every switch reaches a program (the sched_switch
 * tracepoint, the default hook): an idle exit is then held for what follows
 * it (the idle loop enters a state again, or switches, which writes what
 * is held), and a poll slice's exit and re-entry are folded
 * (idle_again()). Where the idle task's switch out is reported, that is
 * within µs; on our VMs' CPU 1 it never is (see ran_since_arrival()), and
 * the woken task's next record (its switch out, an interrupt) writes it.
 * Off with --switch-hook perf-event: there the fold was not measured.
 * Off for `events`: every transition.
 */
const volatile bool fold_idle = false;

/* The idle state a watched CPU enters and leaves: waking from it is part of a late wake-up. */
SEC("?tp_btf/cpu_idle")
int BPF_PROG(on_cpu_idle, unsigned int state, unsigned int cpu_id)
{
	__u64 cpu = bpf_get_smp_processor_id();

	if (!watched_here())
		return 0;
	if (state == (unsigned int)-1)
		return batched(JW_IDLE, 0, 0, state, fold_idle ? JW_HOLD : JW_POINT);
	/* The idle loop runs at task level: no interrupt level is open. */
	levels_closed(cpu);
	if (fold_idle && idle_again(cpu, state))
		return 0;
	return batched(JW_IDLE, 0, 0, state, JW_POINT);
}

/*
 * A watched CPU's new frequency, written by whichever CPU changed it (the
 * governor's), so out of the watched CPU's order, like a wake-up.
 */
/* Per watched CPU: the kernel's tick_stop verdicts (jitterwatch.h). */
struct jw_tick ticks[JW_MAX_CPUS] = {};

/*
 * Why the tick runs: tallied here, read by userspace with the counters. It
 * fires on a nohz_full CPU at each attempt to stop the tick (in an
 * interrupt's exit and on the way to idle), and when the tick stops.
 */
SEC("?tp_btf/tick_stop")
int BPF_PROG(on_tick_stop, int success, int dependency)
{
	struct jw_tick *t;
	__u64 cpu = bpf_get_smp_processor_id();
	int i;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS || !watched[cpu] || floor_only)
		return 0;
	t = &ticks[cpu];
	if (success) {
		t->stops += 1;
	} else {
		t->refusals += 1;
		for (i = 0; i < JW_TICK_DEPS; i++)
			if (dependency & (1 << i))
				t->deps[i] += 1;
	}
	t->last_success = success;
	t->last_dep = dependency;
	return 0;
}

SEC("?tp_btf/cpu_frequency")
int BPF_PROG(on_cpu_frequency, unsigned int frequency, unsigned int cpu_id)
{
	struct jw_event *e;
	struct jw_out o;
	__u64 cpu = cpu_id;

	/*
	 * Widened and pinned in one register before the bound check: checked
	 * on a 32-bit argument, the compiler tests a copy and zero-extends the
	 * original after, and the verifier loses the bound.
	 */
	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return 0;
	e = reserve_on(&o, cpu, JW_FREQ, 0);

	if (!e)
		return 0;
	e->u.fn.func = 0;
	e->u.fn.obj = frequency;
	submit(&o);
	return 0;
}

SEC("?tp_btf/workqueue_execute_start")
int BPF_PROG(on_work_start, struct work_struct *work)
{
	if (!watched_here())
		return 0;
	/*
	 * Held for its end: the item's start and end go out as one record
	 * (a work item was two records, each a write of its own, at 3.6x
	 * the hooks in figure 3b). An item that sleeps, or one interrupted,
	 * has the start written before what follows (the switch's
	 * flush_before(), the interrupt's exit); one that outlives the
	 * batch's age, at its end's first step.
	 */
	return batched(JW_WORK_START, 0, (__u64)work->func, (__u64)work, JW_HOLD);
}

/*
 * The verifier refuses to read a function-pointer argument of a tp_btf
 * program, so the two tracepoints whose function is an argument use
 * untyped raw_tp, whose arguments are plain u64s (and which, unlike classic
 * tracepoints, need no tracefs mounted).
 */
SEC("?raw_tp/workqueue_execute_end")
int on_work_end(struct bpf_raw_tracepoint_args *ctx)
{
	/* (struct work_struct *work, work_func_t function) */
	return batched(JW_WORK_END, 0, ctx->args[1], ctx->args[0], JW_POINT);
}

SEC("?tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_hrtimer_entry, struct hrtimer *timer, ktime_t *now)
{
	if (!watched_here())
		return 0;
	return batched(JW_HRTIMER_ENTRY, 0, (__u64)timer->function, (__u64)timer, JW_ENTER);
}

SEC("?tp_btf/hrtimer_expire_exit")
int BPF_PROG(on_hrtimer_exit, struct hrtimer *timer)
{
	return batched(JW_HRTIMER_EXIT, 0, 0, (__u64)timer, JW_LEAVE);
}

/* x86 system vectors. Optional: other arches and configs lack them. */
#define VECTOR_PROGS(tp, vec)                                              \
	SEC("?tp_btf/" #tp "_entry")                                       \
	int BPF_PROG(on_##tp##_entry, int vector)                          \
	{                                                                  \
		return batched(JW_VECTOR_ENTRY, vec, 0, 0, JW_ENTER);      \
	}                                                                  \
	SEC("?tp_btf/" #tp "_exit")                                        \
	int BPF_PROG(on_##tp##_exit, int vector)                           \
	{                                                                  \
		return batched(JW_VECTOR_EXIT, vec, 0, 0, JW_LEAVE);       \
	}

VECTOR_PROGS(local_timer, JW_VEC_LOCAL_TIMER)
VECTOR_PROGS(reschedule, JW_VEC_RESCHEDULE)
VECTOR_PROGS(call_function, JW_VEC_CALL_FUNCTION)
VECTOR_PROGS(call_function_single, JW_VEC_CALL_FUNCTION_SINGLE)
VECTOR_PROGS(irq_work, JW_VEC_IRQ_WORK)

/* The real cross-CPU callback; csd is NULL when it ran locally. */
/* (smp_call_func_t func, call_single_data_t *csd) */
SEC("?raw_tp/csd_function_entry")
int on_csd_entry(struct bpf_raw_tracepoint_args *ctx)
{
	return batched(JW_CSD_ENTRY, 0, ctx->args[0], ctx->args[1], JW_ENTER);
}

SEC("?raw_tp/csd_function_exit")
int on_csd_exit(struct bpf_raw_tracepoint_args *ctx)
{
	return batched(JW_CSD_EXIT, 0, ctx->args[0], ctx->args[1], JW_LEAVE);
}

SEC("?tp_btf/nmi_handler")
int BPF_PROG(on_nmi, void *handler, s64 delta_ns, int handled)
{
	struct jw_out o;
	struct jw_event *e = reserve(&o, JW_NMI, handled);

	if (!e)
		return 0;
	e->u.nmi.handler = (__u64)handler;
	e->u.nmi.delta_ns = delta_ns;
	submit(&o);
	return 0;
}

/*
 * Passive mode only (not loaded otherwise): a task woken onto a watched
 * CPU, for the wake-up delay of watched threads. It runs on the waker's
 * CPU, any CPU: one array lookup on the woken task's CPU, then return.
 * sched_wakeup fires once the task is queued, so its CPU is final.
 */
SEC("?tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	__u32 cpu;
	struct jw_event *e;
	struct jw_out o;

	/* Direct BTF loads (no probe-read helper): this runs on every wake-up. */
	if (bpf_core_field_exists(p->thread_info.cpu))
		cpu = p->thread_info.cpu;
	else
		cpu = ((struct task_struct___old *)p)->cpu;
	e = reserve_on(&o, cpu, JW_WAKEUP, 0);
	if (!e)
		return 0;
	e->u.wk.pid = p->pid;
	e->u.wk.tgid = p->tgid;
	e->u.wk.prio = p->prio;
	e->u.wk.waker_cpu = bpf_get_smp_processor_id();
	__builtin_memcpy(e->u.wk.comm, p->comm, JW_COMM_LEN);
	submit(&o);
	return 0;
}

/*
 * Passive mode: a task that renames itself where it runs (exec, prctl).
 * A thread that exec'd into the watched name on an isolated CPU never
 * switches again: this is how passive mode learns that it runs there.
 */
SEC("?tp_btf/task_rename")
int BPF_PROG(on_task_rename, struct task_struct *task, const char *comm)
{
	struct jw_event *e;
	struct jw_out o;

	if ((void *)task != (void *)bpf_get_current_task())
		return 0;
	e = reserve(&o, JW_RENAME, 0);
	if (!e)
		return 0;
	e->u.wk.pid = task->pid;
	e->u.wk.tgid = task->tgid;
	e->u.wk.prio = task->prio;
	e->u.wk.waker_cpu = 0;
	bpf_probe_read_kernel_str(e->u.wk.comm, JW_COMM_LEN, comm);
	submit(&o);
	return 0;
}

/*
 * Nothing: the kernel's dispatch alone. Attached several times at once to
 * task_rename on a housekeeping CPU before tracing starts, it prices one
 * firing of a hook where our programs cannot time it (before their first
 * clock read, after their last): src/bpf/dispatch.rs.
 */
SEC("?tp_btf/task_rename")
int BPF_PROG(dispatch_calib)
{
	return 0;
}

/* The sender-side programs: who caused what runs on a watched CPU. */
#include "origins.bpf.h"

/* arm64's own programs (none in the x86 object). */
#include "arm64.bpf.h"

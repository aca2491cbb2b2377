// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): the context-switch
 * programs, one of which userspace attaches (one of the two sched_switch
 * tracepoint programs, by the tracepoint's arguments; the per-CPU perf
 * event's where --switch-hook perf-event asks and the kernel allows it).
 * Writes through reserve() and submit() (steal.bpf.h) and the batch's
 * flush (batch.bpf.h).
 */
#ifndef JITTERWATCH_SWITCH_BPF_H
#define JITTERWATCH_SWITCH_BPF_H

#include "batch.bpf.h"

/* A task's run_delay (schedstat's wait on a runqueue), low 32 bits. */
static __always_inline __u32 run_delay(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->sched_info))
		return JW_UNKNOWN;
	return t->sched_info.run_delay;
}

static __always_inline void fill_switch(struct jw_event *e, struct task_struct *prev,
					struct task_struct *next, __u32 prev_state, __u32 prev_ran_ns,
					__u32 next_delay)
{
	e->u.sw.prev_pid = prev->pid;
	e->u.sw.prev_tgid = prev->tgid;
	e->u.sw.next_pid = next->pid;
	e->u.sw.next_tgid = next->tgid;
	e->u.sw.prev_prio = prev->prio;
	e->u.sw.next_prio = next->prio;
	e->u.sw.prev_state = prev_state;
	e->u.sw.prev_ran_ns = prev_ran_ns;
	e->u.sw.prev_delay = run_delay(prev);
	e->u.sw.next_delay = next_delay;
	e->u.sw.prev_runtime = prev->se.sum_exec_runtime;
	e->u.sw.next_runtime = next->se.sum_exec_runtime;
	e->u.sw.pad = 0;
	__builtin_memcpy(e->u.sw.prev_comm, prev->comm, JW_COMM_LEN);
	__builtin_memcpy(e->u.sw.next_comm, next->comm, JW_COMM_LEN);
	/* The program's own time so far: from its start (the record's time). */
	e->u.sw.own_ns = saturated16(bpf_ktime_get_ns() - e->ts);
}

/*
 * How long prev ran since it was switched in, ns (0: unknown): both on the
 * rq clock, as updated at the start of each __schedule(). Every record
 * carries it, so a switch-in that no program saw is placed by the switch
 * out that follows it. On our VMs' CPU 1, where every test and bench
 * watches, no hook runs as the idle task is switched out: not this event,
 * not the sched_switch tracepoint (ftrace records none there either, 0
 * for 205 switches into idle in a second of 10 ms sleeps, while CPU 0 of
 * the same VM records 109 for 105, and this event 57 with the idle task
 * current). Nor does one as the hypervisor agent's threads switch out
 * (why is not known: a switch into them is seen, the one out never).
 */
static __always_inline __u32 ran_since_arrival(struct task_struct *prev, struct rq *rq)
{
	__u64 arrived, ran;

	/* Absent without CONFIG_SCHED_INFO: then no run time. */
	if (!bpf_core_field_exists(prev->sched_info) || !rq)
		return 0;
	arrived = prev->sched_info.last_arrival;
	if (!arrived)
		return 0;
	ran = rq->clock - arrived;
	/* Over 4.3 s: userspace clamps it to the CPU's last switch. */
	return ran > 0xffffffffULL ? 0xffffffff : ran;
}

/*
 * The tracepoint programs' runqueue: through the task's cfs_rq, which
 * exists with CONFIG_FAIR_GROUP_SCHED only (else NULL, and no run time).
 */
static __always_inline struct rq *rq_of(struct task_struct *t)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(t->se.cfs_rq))
		return NULL;
	cfs = t->se.cfs_rq;
	if (!cfs)
		return NULL;
	return cfs->rq;
}

/*
 * --switch-hook perf-event: a per-CPU software perf event
 * (PERF_COUNT_SW_CONTEXT_SWITCHES, period 1, opened on each watched CPU only):
 * an unwatched CPU then pays a hash lookup per switch and never enters BPF,
 * where the sched_switch tracepoint runs a program on every switch of every
 * CPU; but the watched CPU pays ~235 ns more a switch to reach this program
 * through perf's sample path (BENCHMARKS.md §2). The event fires in prepare_task_switch(): current is still the
 * outgoing task and rq->curr already the incoming one. The runqueue is
 * reached through the outgoing task's cfs_rq (CONFIG_FAIR_GROUP_SCHED, which
 * userspace checks), because the per-CPU runqueues symbol needs
 * CONFIG_KALLSYMS_ALL. Where no switch out of the idle task is reported
 * (our VMs' CPU 1: see ran_since_arrival()), each record says how long
 * prev ran, which places that switch.
 */
/*
 * The state of a task switched out: before 5.14 task_struct.state (a long),
 * since then __state.
 */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return ((struct task_struct___pre514 *)t)->state;
}

/*
 * --stacks-above: the kernel stack prev leaves the CPU with (where it
 * blocked, or where it was preempted), if it ran that long in one go:
 * such a task is what a long stall's time went to. Taken while the switch
 * record is open, so the walk is in that record's own time (ours, never
 * the kernel's); only long runs pay for it. Its id, or negative.
 */
static __always_inline long stack_of_prev(void *ctx, struct task_struct *prev, __u32 ran_ns)
{
	if (!stacks_above_ns || ran_ns < stacks_above_ns || !prev->pid)
		return -1;
	return bpf_get_stackid(ctx, &stacks, 0);
}

/* After prev's switch record: which stack it left with (JW_STACK: pid, id),
 * a record of its own so that a switch record stays its size. */
static __always_inline void name_stack(struct task_struct *prev, long id)
{
	struct jw_event *e;
	struct jw_out o;

	if (id < 0)
		return;
	e = reserve(&o, JW_STACK, 0);
	if (!e)
		return;
	e->u.fn.func = prev->pid;
	e->u.fn.obj = id;
	submit(&o);
}

/*
 * Needs bpf_get_current_task_btf (5.11+): userspace loads it only where
 * the kernel has that helper, and takes the tracepoint elsewhere.
 */
SEC("?perf_event")
int on_switch_out(struct bpf_perf_event_data *ctx)
{
	struct task_struct *prev = bpf_get_current_task_btf();
	struct cfs_rq *cfs = prev->se.cfs_rq;
	struct rq *rq;
	struct task_struct *next;
	__u32 state, ran;
	struct jw_event *e;
	struct jw_out o;
	long id;

	if (floor_only || !cfs)
		return 0;
	rq = cfs->rq;
	if (!rq)
		return 0;
	next = rq->curr;
	if (!next)
		return 0;
	state = task_state(prev);
	/* The CPU's batch first: its records stay in order. */
	flush_before(bpf_get_smp_processor_id());
	/* The tracepoint's preempt flag: switched out while still runnable. */
	e = reserve(&o, JW_SWITCH, state == 0);
	if (!e)
		return 0;
	ran = ran_since_arrival(prev, rq);
	id = stack_of_prev(ctx, prev, ran);
	/* Fired after sched_info_arrive: next's reading has its wait in. */
	fill_switch(e, prev, next, state, ran, JW_UNKNOWN);
	submit(&o);
	name_stack(prev, id);
	return 0;
}

/* The default hook (and where the perf event cannot be opened): runs on every CPU. */
SEC("?tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	struct jw_event *e;
	struct jw_out o;
	struct rq *rq;
	__u32 ran;
	long id;

	if (!watched_here())
		return 0;
	flush_before(bpf_get_smp_processor_id());
	e = reserve(&o, JW_SWITCH, preempt);
	if (!e)
		return 0;
	rq = rq_of(prev);
	ran = ran_since_arrival(prev, rq);
	id = stack_of_prev(ctx, prev, ran);
	fill_switch(e, prev, next, prev_state, ran, run_delay(next));
	submit(&o);
	name_stack(prev, id);
	return 0;
}

/*
 * The same before 5.18, whose tracepoint has no prev_state argument (the
 * verifier refuses a read past the last one): the state is read from the
 * task. Userspace loads one of the two, by the tracepoint's arity.
 */
SEC("?tp_btf/sched_switch")
int BPF_PROG(on_sched_switch_old, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	struct jw_event *e;
	struct jw_out o;
	struct rq *rq;
	__u32 ran;
	long id;

	if (!watched_here())
		return 0;
	flush_before(bpf_get_smp_processor_id());
	e = reserve(&o, JW_SWITCH, preempt);
	if (!e)
		return 0;
	rq = rq_of(prev);
	ran = ran_since_arrival(prev, rq);
	id = stack_of_prev(ctx, prev, ran);
	fill_switch(e, prev, next, task_state(prev), ran, run_delay(next));
	submit(&o);
	name_stack(prev, id);
	return 0;
}

#endif

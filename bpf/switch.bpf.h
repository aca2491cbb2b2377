// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): the context-switch
 * programs, one of which userspace attaches (the per-CPU perf event where
 * the kernel allows it, else one of the two sched_switch tracepoint
 * programs, by the tracepoint's arguments). Uses reserve() and submit()
 * from the including file.
 */
#ifndef JITTERWATCH_SWITCH_BPF_H
#define JITTERWATCH_SWITCH_BPF_H

static __always_inline void fill_switch(struct jw_event *e, struct task_struct *prev,
					struct task_struct *next, __u32 prev_state, __u32 prev_ran_ns)
{
	e->u.sw.prev_pid = prev->pid;
	e->u.sw.prev_tgid = prev->tgid;
	e->u.sw.next_pid = next->pid;
	e->u.sw.next_tgid = next->tgid;
	e->u.sw.prev_prio = prev->prio;
	e->u.sw.next_prio = next->prio;
	e->u.sw.prev_state = prev_state;
	e->u.sw.prev_ran_ns = prev_ran_ns;
	__builtin_memcpy(e->u.sw.prev_comm, prev->comm, JW_COMM_LEN);
	__builtin_memcpy(e->u.sw.next_comm, next->comm, JW_COMM_LEN);
}

/*
 * Context switches come from a per-CPU software perf event
 * (PERF_COUNT_SW_CONTEXT_SWITCHES, period 1, opened on each watched CPU only):
 * an unwatched CPU then pays a hash lookup per switch and never enters BPF,
 * where the sched_switch tracepoint would run a program on every switch of
 * every CPU. The event fires in prepare_task_switch(): current is still the
 * outgoing task and rq->curr already the incoming one. The runqueue is
 * reached through the outgoing task's cfs_rq (CONFIG_FAIR_GROUP_SCHED, which
 * userspace checks), because the per-CPU runqueues symbol needs
 * CONFIG_KALLSYMS_ALL. The event never fires when the idle task is switched
 * out: each record says how long prev ran, which places that switch.
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
	__u64 arrived, ran;
	__u32 state;
	struct jw_event *e;

	if (!cfs)
		return 0;
	rq = cfs->rq;
	if (!rq)
		return 0;
	next = rq->curr;
	if (!next)
		return 0;
	state = task_state(prev);
	/* Both on the rq clock, as updated at the start of each __schedule(). */
	arrived = prev->sched_info.last_arrival;
	ran = rq->clock - arrived;
	if (!arrived)
		ran = 0;
	else if (ran > 0xffffffffULL)
		ran = 0xffffffffULL; /* over 4.3 s: userspace clamps to its last switch */
	/* The tracepoint's preempt flag: switched out while still runnable. */
	e = reserve(JW_SWITCH, state == 0);
	if (!e)
		return 0;
	fill_switch(e, prev, next, state, ran);
	submit(e);
	return 0;
}

/* The fallback where the perf event cannot be opened: runs on every CPU. */
SEC("?tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	struct jw_event *e = reserve(JW_SWITCH, preempt);

	if (!e)
		return 0;
	/* Every switch is seen here: no run time is needed to place one. */
	fill_switch(e, prev, next, prev_state, 0);
	submit(e);
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
	struct jw_event *e = reserve(JW_SWITCH, preempt);

	if (!e)
		return 0;
	fill_switch(e, prev, next, task_state(prev), 0);
	submit(e);
	return 0;
}

#endif

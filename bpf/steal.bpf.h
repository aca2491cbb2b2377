// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): the steal clock,
 * read after every record about the current CPU: reserve() and submit(),
 * which every program but the sender side's writes through.
 */
#ifndef JITTERWATCH_STEAL_BPF_H
#define JITTERWATCH_STEAL_BPF_H

#include "record.bpf.h"

/*
 * The steal clock (time the hypervisor ran something else while this vCPU
 * was runnable) as each watched CPU last reported it. The guest kernel
 * reads the paravirt clock (KVM, Xen, VMware) into its runqueue at every
 * rq clock update; the per-CPU steal_time itself needs CONFIG_KALLSYMS_ALL
 * to be reached from BPF. Written only when the value changes.
 */
__u64 steal_seen[JW_MAX_CPUS] = {};

/* Absent without CONFIG_PARAVIRT_TIME_ACCOUNTING: then nothing is read. */
struct rq___steal {
	u64 prev_steal_time_rq;
} __attribute__((preserve_access_index));

/*
 * After a record about this CPU at `ts`: when its runqueue's steal reading
 * moved, a JW_STEAL record with the same time says so. A host pause shows
 * at the first rq clock update after the vCPU runs again (the tick that
 * was due meanwhile), so the increment lands right after its stall.
 */
/*
 * The steal reading of `cpu`'s runqueue (the current CPU's). Its address
 * is looked up once, through the current task (its cfs_rq's rq: the
 * per-CPU runqueues symbol needs CONFIG_KALLSYMS_ALL), and kept in the
 * nest; then each read is one probe read of the line that holds the
 * reading. Zero when there is none to read.
 */
static __always_inline __u64 read_steal(__u64 cpu)
{
	struct task_struct *t;
	__u64 rq;

	if (!bpf_core_field_exists(struct rq___steal, prev_steal_time_rq))
		return 0;
	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return 0;
	rq = nests[cpu].rq;
	if (!rq) {
		t = (struct task_struct *)bpf_get_current_task();
		rq = (__u64)BPF_CORE_READ(t, se.cfs_rq, rq);
		if (!rq)
			return 0;
		nests[cpu].rq = rq;
	}
	return BPF_CORE_READ((struct rq___steal *)rq, prev_steal_time_rq);
}

static __always_inline void note_steal(__u64 cpu, __u64 ts)
{
	struct jw_event *e;
	struct jw_out o;
	__u64 steal;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return;
	steal = read_steal(cpu);
	if (!steal || steal == steal_seen[cpu])
		return;
	e = reserve_on(&o, cpu, JW_STEAL, 0);
	if (!e)
		return;
	steal_seen[cpu] = steal;
	e->ts = ts;
	e->u.fn.func = 0;
	e->u.fn.obj = steal;
	commit(&o);
}

/* A record about the current CPU; its steal clock follows it (submit()). */
static __always_inline struct jw_event *reserve(struct jw_out *o, __u8 kind, __u8 sub)
{
	struct jw_event *e = reserve_on(o, bpf_get_smp_processor_id(), kind, sub);

	o->steal = 1;
	return e;
}

/*
 * The record out, then the steal reading reserve() asked for: a record of
 * its own after this one (at its time), once the region is free again.
 */
static __always_inline void submit(struct jw_out *o)
{
	__u64 ts = commit(o);

	if (o->steal && ts)
		note_steal(o->me, ts);
}

#endif

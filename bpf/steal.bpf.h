// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): the steal clock,
 * read by reserve() for every record. Uses reserve_on() and submit() from
 * the including file.
 */
#ifndef JITTERWATCH_STEAL_BPF_H
#define JITTERWATCH_STEAL_BPF_H

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
 * The current runqueue's steal reading. Typed loads through
 * bpf_get_current_task_btf (5.11+); before it, probe reads from
 * bpf_get_current_task. Zero when there is none to read.
 */
static __always_inline __u64 read_steal(void)
{
	struct task_struct *t;
	struct cfs_rq *cfs;
	struct rq *rq;

	if (!bpf_core_field_exists(struct rq___steal, prev_steal_time_rq))
		return 0;
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		t = (struct task_struct *)bpf_get_current_task();
		rq = BPF_CORE_READ(t, se.cfs_rq, rq);
		if (!rq)
			return 0;
		return BPF_CORE_READ((struct rq___steal *)rq, prev_steal_time_rq);
	}
	t = bpf_get_current_task_btf();
	cfs = t->se.cfs_rq;
	if (!cfs)
		return 0;
	rq = cfs->rq;
	if (!rq)
		return 0;
	return ((struct rq___steal *)rq)->prev_steal_time_rq;
}

static __always_inline void note_steal(__u64 cpu, __u64 ts)
{
	struct jw_event *e;
	struct jw_out o;
	__u64 steal;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return;
	steal = read_steal();
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

#endif

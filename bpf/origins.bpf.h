// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton), kept apart because
 * these programs run elsewhere: in the sender's context, on every CPU,
 * where the rest runs on the watched CPUs. Writes through reserve_on()
 * and submit() (record.bpf.h, steal.bpf.h).
 */
#ifndef JITTERWATCH_ORIGINS_BPF_H
#define JITTERWATCH_ORIGINS_BPF_H

#include "steal.bpf.h"

/*
 * Origins (not loaded with --no-origins): who, on any CPU, sent an IPI to,
 * queued work on, or woke a task on a watched CPU. Each runs in the
 * sender's context on every CPU; one lookup of the target in the watched
 * set comes first.
 */
enum jw_origin_kind _jw_origin_kind = 0;

/* The watched CPUs as a list, for sends to a mask (set from userspace). */
__u32 watched_list[JW_MAX_LISTED] = {};
__u32 watched_n = 0;

/* The sender: current, by helpers every kernel has (no task_struct read). */
static __always_inline void fill_origin(struct jw_event *e, __u64 callsite, __u64 func, __u32 woken)
{
	__u64 id = bpf_get_current_pid_tgid();

	e->u.org.pid = (__u32)id;
	e->u.org.tgid = id >> 32;
	e->u.org.from_cpu = bpf_get_smp_processor_id();
	e->u.org.woken = woken;
	e->u.org.callsite = callsite;
	e->u.org.func = func;
	if (bpf_get_current_comm(e->u.org.comm, sizeof(e->u.org.comm)))
		e->u.org.comm[0] = 0;
}

static __always_inline void origin(__u64 cpu, __u8 kind, __u64 callsite, __u64 func, __u32 woken)
{
	struct jw_event *e;
	struct jw_out o;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return;
	e = reserve_on(&o, cpu, JW_ORIGIN, kind);
	if (!e)
		return;
	fill_origin(e, callsite, func, woken);
	submit(&o);
}

SEC("?tp_btf/ipi_send_cpu")
int BPF_PROG(on_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback)
{
	origin(cpu, JW_ORIGIN_IPI, callsite, (__u64)callback, 0);
	return 0;
}

SEC("?tp_btf/ipi_send_cpumask")
int BPF_PROG(on_ipi_send_cpumask, const struct cpumask *mask, unsigned long callsite, void *callback)
{
	/* As a number: the verifier allows no variable offset on the pointer. */
	__u64 bits = (__u64)mask;
	__u32 i, n = watched_n;

	for (i = 0; i < JW_MAX_LISTED && i < n; i++) {
		__u32 c = watched_list[i];
		__u64 word = 0;

		if (c >= JW_MAX_CPUS)
			break;
		if (bpf_probe_read_kernel(&word, sizeof(word), (void *)(bits + (c / 64) * 8)))
			continue;
		if (word & (1ULL << (c % 64)))
			origin(c, JW_ORIGIN_IPI, callsite, (__u64)callback, 0);
	}
	return 0;
}

/*
 * The IPI send tracepoints name the generic handler as the callback of a
 * cross-CPU function call; the function itself is queued here, once per
 * target CPU (with or without an IPI, if one is already pending). Untyped
 * raw_tp: its function-pointer argument cannot be read from tp_btf.
 * (unsigned int cpu, unsigned long callsite, smp_call_func_t func, call_single_data_t *csd)
 */
SEC("?raw_tp/csd_queue_cpu")
int on_csd_queue(struct bpf_raw_tracepoint_args *ctx)
{
	origin(ctx->args[0], JW_ORIGIN_IPI, ctx->args[1], ctx->args[2], 0);
	return 0;
}

/* Per-CPU pools only: unbound work may run on any CPU of its cpumask. */
SEC("?tp_btf/workqueue_queue_work")
int BPF_PROG(on_queue_work, int req_cpu, struct pool_workqueue *pwq, struct work_struct *work)
{
	struct worker_pool *pool = pwq->pool;
	int cpu;

	if (!pool)
		return 0;
	cpu = pool->cpu;
	if (cpu < 0)
		return 0;
	origin(cpu, JW_ORIGIN_WORK, (__u64)work, (__u64)work->func, 0);
	return 0;
}

/*
 * In the waker's context, before the wakee's CPU is chosen: its CPU then is
 * where it last ran (a pinned task's own).
 */
SEC("?tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	__u32 cpu;

	if (bpf_core_field_exists(p->thread_info.cpu))
		cpu = p->thread_info.cpu;
	else
		cpu = ((struct task_struct___old *)p)->cpu;
	origin(cpu, JW_ORIGIN_WAKE, 0, 0, p->pid);
	return 0;
}

#endif

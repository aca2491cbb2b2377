// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Kernel side of jitterwatch: one tp_btf program per tracepoint, each
 * filtered to the watched CPUs. The events of an interruption go into the
 * CPU's batch, written as one record when it ends (batch.bpf.h); context
 * switches, NMIs and what other CPUs do to a watched one are jw_events.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jitterwatch.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Forces struct jw_event into BTF so libbpf-cargo generates its Rust type. */
struct jw_event _jw_event = {};
enum jw_kind _jw_kind = 0;
enum jw_vector _jw_vector = 0;
enum jw_limits _jw_limits = 0;
struct jw_batch _jw_batch = {};
enum jw_sentinel _jw_sentinel = 0;

enum jw_stop _jw_stop = 0;

/*
 * Where the benchmark stops our programs (enum jw_stop; never set but by
 * JITTERWATCH_BPF_FLOOR). Read-only: the verifier drops the code a value
 * skips, so JW_STOP_NONE costs nothing.
 */
const volatile __u8 bench_stop = JW_STOP_NONE;
/* The floor: every program returns right after its watched-CPU test. */
#define floor_only (bench_stop == JW_STOP_HOOK)

/*
 * --stacks-above: a task that leaves a watched CPU after running this
 * long (ns) in one go has its kernel stack taken (0: never). Read-only,
 * so with stacks off the verifier drops the code that takes them.
 */
const volatile __u64 stacks_above_ns = 0;

/*
 * Those stacks, by id (bpf_get_stackid). Userspace reads each as its
 * JW_STACK record arrives and deletes it, so a bucket is free again by
 * the next long run; sized to 1 entry when stacks are off.
 */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1024);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, JW_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* Watched CPUs: set from userspace before attach; one lookup on every CPU. */
__u8 watched[JW_MAX_CPUS] = {};

/*
 * Two rings, by the CPU that writes: `events` for the watched CPUs' own
 * records, `elsewhere` for what the other CPUs write about them (a sending,
 * a wake-up, a frequency change). A record's cost on a watched CPU is
 * mostly the ring's shared lines (its lock, its producer position, the
 * data after the last record): with one ring, every sending from a
 * housekeeping CPU pulled them over there, and the watched CPU's next
 * record fetched them back, about 250 ns more than a record that finds
 * them in its own cache (figure 3b, measured with a second record written
 * right after the first). Userspace reads both and puts their events in
 * time order.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/*
 * Small: its records are the sendings onto the watched CPUs, a few per
 * interruption (2,730 records of 96 bytes, drained every 2 ms once
 * busy), and a ring counts twice its size in the reader's RSS once a long
 * run has wrapped it (libbpf maps its data twice): 2 MiB here took figure
 * 5 from 29.6 to 33.4 MiB.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} elsewhere SEC(".maps");

/*
 * Failed reservations, per CPU: the map for userspace's totals, the array
 * so every record carries its CPU's count (a plain read on the success
 * path; both are written only when a reservation fails).
 */
__u32 dropped[JW_MAX_CPUS] = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* The watched CPUs' own regions, and the nest their writer holds. */
#include "region.bpf.h"

/*
 * A reservation on `cpu` failed: counted in the map, in dropped[] (what
 * userspace reads) and in the CPU's nest, whose record header carries the
 * count with each record. The nest's first line is one every writer on a
 * watched CPU touches already (its `active`); dropped[] would be one more
 * line, cold after a millisecond of spinning, read by every record.
 */
static __always_inline void count_drop(__u64 cpu)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);

	if (n)
		*n += 1;
	barrier_var(cpu);
	if (cpu < JW_MAX_CPUS) {
		dropped[cpu] += 1;
		nests[cpu].rec.dropped += 1;
	}
}

/* The CPU's drops so far, as its records carry them. */
static __always_inline __u32 drops_on(__u64 cpu)
{
	barrier_var(cpu);
	return cpu < JW_MAX_CPUS ? nests[cpu].rec.dropped : 0;
}

/*
 * Where a record is being written: the writing CPU's region (`r`, whose
 * nest is held until submit()), or a ring buffer (`rb`, the reservation).
 * Two pointers, so that the verifier follows each kind to its own commit.
 */
struct jw_out {
	struct jw_event *rb;
	struct jw_region *r;
	struct jw_event *at; /* the record, in the region */
	__u64 me; /* the writing CPU */
	__u64 steal; /* a steal reading is due after the record (reserve()) */
};

/*
 * A record about `cpu` (the current CPU but for wake-ups), if it is
 * watched; the ring and the drop counters are the current CPU's (its
 * region or the events ring when it is watched, else elsewhere), where
 * the record is written.
 */
static __always_inline struct jw_event *reserve_on(struct jw_out *o, __u64 cpu, __u8 kind, __u8 sub)
{
	struct jw_event *e = NULL;
	__u64 me;

	o->rb = NULL;
	o->r = NULL;
	o->steal = 0;
	/*
	 * Each index is 64-bit and pinned in its register before its bound
	 * check (barrier_var): checked as a 32-bit value, the compiler tests a
	 * zero-extended copy and indexes with the original, which 6.1's
	 * verifier cannot bound ("R1 unbounded memory access").
	 */
	barrier_var(cpu);
	/* The early return, first: most calls come from unwatched CPUs. */
	if (cpu >= JW_MAX_CPUS || !watched[cpu] || floor_only)
		return NULL;
	me = bpf_get_smp_processor_id();
	barrier_var(me);
	if (me >= JW_MAX_CPUS)
		return NULL;
	o->me = me;
	/* Each call names its ring: the verifier needs the map known. */
	if (watched[me]) {
		o->r = region_take(me);
		if (o->r) {
			e = o->at = region_space(o->r, sizeof(*e));
			if (!e) {
				region_put(me);
				o->r = NULL;
			}
		} else {
			e = o->rb = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		}
	} else {
		e = o->rb = bpf_ringbuf_reserve(&elsewhere, sizeof(*e), 0);
	}
	if (!e) {
		count_drop(me);
		return NULL;
	}
	e->ts = bpf_ktime_get_ns();
	e->cpu = cpu;
	e->kind = kind;
	e->sub = sub;
	e->dropped = drops_on(me);
	return e;
}

/*
 * No wakeup: a wakeup from a watched CPU raises irq_work and an IPI, which is
 * exactly the noise we measure. The reader polls on a short period instead.
 * The record's time, for the steal reading that may follow it.
 */
static __always_inline __u64 commit(struct jw_out *o)
{
	__u64 ts;

	/*
	 * On the region, which the verifier knows non-null once checked (a
	 * map value), never on the ring buffer's pointer: 6.1's verifier
	 * does not carry a reservation's non-null check to a second test of
	 * it, and took `!o->rb` on a path that held one (an unreleased
	 * reference, in vmtest's Debian 12 VM). Called only once reserved.
	 */
	if (o->r) {
		ts = o->at->ts;
		region_commit(o->r, sizeof(struct jw_event));
		region_put(o->me);
	} else {
		ts = o->rb->ts;
		bpf_ringbuf_submit(o->rb, BPF_RB_NO_WAKEUP);
	}
	return ts;
}

/* note_steal(): the hypervisor's steal clock, read with every record. */
#include "steal.bpf.h"

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

/* Whether this CPU is watched: the first test of most programs. */
static __always_inline bool watched_here(void)
{
	__u64 cpu = bpf_get_smp_processor_id();

	barrier_var(cpu);
	return cpu < JW_MAX_CPUS && watched[cpu] && !floor_only;
}

/* One record per interruption: batched(). */
#include "batch.bpf.h"

/* The context-switch programs. */
#include "switch.bpf.h"

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

/* current_syscall(): the pt_regs of the user entry, per architecture. */
#include "arch.bpf.h"

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
/* Before 5.16 the CPU was task_struct.cpu, not thread_info.cpu. */
struct task_struct___old {
	int cpu;
} __attribute__((preserve_access_index));

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

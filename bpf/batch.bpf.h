// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): the events of one
 * interruption of a watched CPU, kept per CPU as they happen and written
 * as one record (struct jw_batch) when the interruption ends. One ring
 * buffer write, one steal-clock read per interruption instead of one per
 * tracepoint: the record's write (its lines, cold after a millisecond
 * of anything else) is most of what a record costs on the watched CPU.
 * Writes through record.bpf.h (the CPU's nest and region: region.bpf.h)
 * and reads the steal clock (steal.bpf.h).
 */
#ifndef JITTERWATCH_BATCH_BPF_H
#define JITTERWATCH_BATCH_BPF_H

#include "steal.bpf.h"

/* A batch held longer than this is written at the next event (an exit that
 * never came must not hold the events back from the collector). */
#define JW_BATCH_AGE_NS 200000ULL

/*
 * A program that appends (and does not write the batch) reads the clock
 * again to time itself one run in JW_OWN_EVERY of its own; its other runs
 * carry its last timing (its slot in the nest: own_slot()). Its run is
 * short and steady (a few loads and stores); the clock read would cost a
 * quarter of it. A program that writes the batch times itself on one of
 * its writes in JW_OWN_EVERY too, up to the copy (which it adds as last
 * timed) and then the whole of it; its other writes carry that whole. A
 * clock read is most of a stage of our work (figure 3b): one per
 * interruption fewer is worth an estimate. Per program, not per kind: the
 * tick's exit, which writes most batches, once set every writer's figure,
 * and a reschedule IPI's own time came out at a fifth of what the kernel's
 * BPF statistics count for its two programs.
 */
#define JW_OWN_EVERY 8

/* One more run of a slot (high 16 bits); whether this one times itself. */
static __always_inline bool own_turn(__u32 *v)
{
	*v += 1 << 16;
	return ((*v >> 16) % JW_OWN_EVERY) == 0;
}

/* A slot's new timing, its run count kept. */
static __always_inline __u32 own_set(__u32 v, __u16 ns)
{
	return (v & 0xffff0000u) | ns;
}

/* The action each IRQ number was last named with (its name is sent once). */
__u64 irq_named[JW_MAX_IRQS];

static __always_inline __u16 saturated16(__u64 ns)
{
	return ns > 0xffff ? 0xffff : ns;
}

/*
 * `size` bytes of the nest's record out: to the CPU's region, whose nest
 * the caller holds (the outermost of our programs), else to the ring
 * buffer. Non-zero if there was no room.
 */
static __always_inline long write_out(__u64 cpu, struct jw_batch *rec, __u64 size)
{
	struct jw_region *r = region_at(cpu);
	void *dst;

	if (!r)
		return bpf_ringbuf_output(&events, rec, size, BPF_RB_NO_WAKEUP);
	dst = region_space(r, size);
	if (!dst || bpf_probe_read_kernel(dst, size, rec))
		return -1;
	region_commit(r, size);
	return 0;
}

/*
 * Writes the held items as one record of exactly their size (the ring
 * buffer copies it from the nest); `mine`: the item of the program
 * writing it (JW_BATCH_ITEMS: none), which started at `t0` and owns slot
 * `slot`; its own time is timed or carried as JW_OWN_EVERY says.
 */
static __always_inline void flush(struct jw_nest *st, __u64 cpu, __u32 mine, __u32 slot, __u64 t0)
{
	__u64 n = st->rec.n, m = mine, size, t1 = 0, now;
	__u32 w = 0;

	if (bench_stop == JW_STOP_APPEND) {
		st->rec.n = 0;
		return;
	}
	/*
	 * n pinned and clamped in its own register: the size the helper
	 * reads must have a bound the verifier sees on every kernel (a
	 * clamp the compiler may fold into the caller's tests does not).
	 */
	barrier_var(n);
	if (n == 0)
		return;
	if (n > JW_BATCH_ITEMS)
		n = JW_BATCH_ITEMS;
	st->rec.cpu = cpu;
	st->rec.kind = JW_BATCH;
	/* rec.dropped is the CPU's running count already (count_drop()). */
	st->rec.steal = read_steal(cpu);
	/* 64-bit and pinned before its bound check, as in reserve_on(). */
	barrier_var(m);
	barrier_var(slot);
	if (m < JW_BATCH_ITEMS && slot < JW_OWN_SLOTS) {
		w = st->wrote[slot];
		if (own_turn(&w)) {
			t1 = bpf_ktime_get_ns();
			st->rec.items[m].own_ns = saturated16(t1 - t0 + st->out_est);
		} else {
			st->rec.items[m].own_ns = w & 0xffff;
		}
	}
	size = __builtin_offsetof(struct jw_batch, items) + n * sizeof(struct jw_item);
	if (write_out(cpu, &st->rec, size)) {
		count_drop(cpu);
	} else if (t1) {
		now = bpf_ktime_get_ns();
		st->out_est = saturated16(now - t1);
		w = own_set(w, saturated16(now - t0));
	}
	if (m < JW_BATCH_ITEMS && slot < JW_OWN_SLOTS)
		st->wrote[slot] = w;
	st->rec.n = 0;
}

/* A record of one item, for a program inside another of ours. */
static __always_inline void write_one(__u64 cpu, __u8 kind, __u8 sub, __u64 a, __u64 b, __u64 t0)
{
	struct jw_batch *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e) - (JW_BATCH_ITEMS - 2) * sizeof(struct jw_item), 0);
	if (!e) {
		count_drop(cpu);
		return;
	}
	e->ts = t0;
	e->cpu = cpu;
	e->kind = JW_BATCH;
	e->n = 1;
	barrier_var(cpu);
	e->dropped = drops_on(cpu);
	e->steal = 0;
	e->items[0].dt = 0;
	e->items[0].kind = kind;
	e->items[0].sub = sub;
	e->items[0].a = a;
	e->items[0].b = b;
	e->items[0].own_ns = saturated16(bpf_ktime_get_ns() - t0);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Interrupt levels: an entry opens one, an exit closes one. */
enum jw_step {
	JW_POINT = 0,
	JW_ENTER = 1,
	JW_LEAVE = 2,
	/* A point held for what follows it (an idle exit: fold_idle). */
	JW_HOLD = 3,
};

/*
 * One event of a watched CPU, into its batch: written out once no
 * interrupt level is open (the interruption is over), when nearly full, or
 * when held too long.
 */
static __always_inline int batched(__u8 kind, __u8 sub, __u64 a, __u64 b, enum jw_step step)
{
	__u64 cpu = bpf_get_smp_processor_id();
	struct jw_nest *st;
	struct jw_item *it;
	__u64 t0;
	__u32 i, slot = own_slot(kind, sub), v;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS || !watched[cpu] || floor_only)
		return 0;
	/*
	 * The clock first, before the nest's lines (cold after a millisecond
	 * of anything else) are touched: the event's time is nearer its
	 * tracepoint, and the miss is inside our own time, not before it.
	 */
	t0 = bpf_ktime_get_ns();
	st = &nests[cpu];
	/*
	 * Plain increments: a program that interrupts this one (on this CPU,
	 * nothing else touches it) has put the count back before this one
	 * goes on, so no atomic is needed.
	 */
	st->active += 1;
	if (bench_stop == JW_STOP_CLOCK)
		goto out;
	if (st->active != 1) {
		write_one(cpu, kind, sub, a, b, t0);
		goto out;
	}
	/*
	 * An interrupt between our clock read and the increment (one held
	 * back by a host pause, say) had its programs take the empty nest and
	 * add items later than t0: ours would sit before them in the batch
	 * with a negative offset, read back as 4.29 s later, and the CPU's
	 * timeline would run 4.29 s ahead of its events for the rest of the
	 * run (seen at a TCP ping-pong, 2 runs in 5, when nothing checked).
	 * Read again: the nest is ours now.
	 */
	if (t0 < st->last_t)
		t0 = bpf_ktime_get_ns();
	i = st->rec.n;
	/*
	 * A full batch cannot happen (flushed before it fills; kept for the
	 * verifier). One held too long goes out before this item joins it,
	 * so an item's 32-bit offset stays within the batch's age: held on
	 * (an interrupt level whose exit ran nested in another of our
	 * programs leaves the depth up), the next item seconds later would
	 * have wrapped it.
	 */
	if (i >= JW_BATCH_ITEMS || (i > 0 && t0 - st->rec.ts > JW_BATCH_AGE_NS)) {
		flush(st, cpu, JW_BATCH_ITEMS, 0, t0);
		i = 0;
	}
	if (i == 0)
		st->rec.ts = t0;
	it = &st->rec.items[i & (JW_BATCH_ITEMS - 1)];
	it->dt = t0 - st->rec.ts;
	it->own_ns = 0;
	it->kind = kind;
	it->sub = sub;
	it->a = a;
	it->b = b;
	st->rec.n = i + 1;
	st->last_t = t0;
	if (step == JW_ENTER)
		st->depth += 1;
	else if (step == JW_LEAVE && st->depth > 0)
		st->depth -= 1;
	barrier_var(slot);
	if ((st->depth == 0 && step != JW_HOLD) || st->rec.n > JW_BATCH_ITEMS - 4) {
		flush(st, cpu, i, slot, t0);
	} else if (slot < JW_OWN_SLOTS) {
		v = st->own[slot];
		if (own_turn(&v))
			v = own_set(v, saturated16(bpf_ktime_get_ns() - t0));
		it->own_ns = v & 0xffff;
		st->own[slot] = v;
	}
out:
	st->active -= 1;
	return 0;
}

/*
 * Before any other record of this CPU (a context switch): what it holds
 * goes first, so the CPU's records stay in order. Called with interrupts
 * off, so never inside another of our programs.
 */
static __always_inline void flush_before(__u64 cpu)
{
	struct jw_nest *st;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return;
	st = &nests[cpu];
	/* Held while it writes: an NMI's program must not write the region too. */
	st->active += 1;
	if (st->active == 1 && st->rec.n > 0)
		flush(st, cpu, JW_BATCH_ITEMS, 0, 0);
	st->active -= 1;
}

/* The CPU enters an idle state: no interrupt level can be open. */
static __always_inline void levels_closed(__u64 cpu)
{
	barrier_var(cpu);
	if (cpu < JW_MAX_CPUS)
		nests[cpu].depth = 0;
}

/*
 * The idle loop entering `state` again with nothing since its last exit
 * but that exit, held in the batch (JW_HOLD): a poll state that ran out
 * its time limit and the governor picked the same state again. The pair
 * is dropped, so the idle stretch reads as one (entered at its first
 * entry, left at its last exit), and no record is written for it. A KVM
 * guest's haltpoll driver polls in ~200 µs slices: 6,400 idle events a
 * second on a CPU that wakes cyclictest each ms, each its own record
 * before (a tenth of a µs of ours each on the watched CPU, and as much
 * of the collector's time as all the other events). Another state, or
 * anything between, and both are written as before. True when dropped.
 */
static __always_inline bool idle_again(__u64 cpu, __u32 state)
{
	struct jw_nest *st;
	bool again;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return false;
	st = &nests[cpu];
	/* Held as flush_before() holds it: an NMI's program waits its turn. */
	st->active += 1;
	again = st->active == 1 && st->rec.n == 1 && st->rec.items[0].kind == JW_IDLE &&
		st->rec.items[0].b == (__u32)-1 && st->idle_state == state + 1;
	if (again)
		st->rec.n = 0;
	else
		st->idle_state = state + 1;
	st->active -= 1;
	return again;
}

/*
 * An IRQ's action name, sent once for each action an IRQ number takes (a
 * record of its own, before the batch holding the entry), not with every
 * entry: reading it is a probe-read of cold memory.
 */
static __always_inline void name_irq(int irq, struct irqaction *action)
{
	struct jw_event *e;
	struct jw_out o;
	__u64 key = irq;

	__u64 cpu = bpf_get_smp_processor_id();

	barrier_var(cpu);
	if (cpu < JW_MAX_CPUS && nests[cpu].irq == key && nests[cpu].irq_action == (__u64)action)
		return;
	barrier_var(key);
	if (key < JW_MAX_IRQS && irq_named[key] == (__u64)action) {
		if (cpu < JW_MAX_CPUS) {
			nests[cpu].irq = key;
			nests[cpu].irq_action = (__u64)action;
		}
		return;
	}
	e = reserve_on(&o, bpf_get_smp_processor_id(), JW_IRQ_NAME, 0);
	if (!e)
		return;
	e->u.irq.irq = irq;
	e->u.irq.ret = 0;
	if (bpf_probe_read_kernel_str(e->u.irq.name, sizeof(e->u.irq.name), action->name) < 0)
		e->u.irq.name[0] = 0;
	/* What --stacks-above shows for a stall an IRQ topped: its functions. */
	e->u.irq.handler = (__u64)action->handler;
	e->u.irq.thread_fn = (__u64)action->thread_fn;
	submit(&o);
	/* After the record: a CPU that sees the new action finds its name sent. */
	if (key < JW_MAX_IRQS)
		irq_named[key] = (__u64)action;
	if (cpu < JW_MAX_CPUS) {
		nests[cpu].irq = key;
		nests[cpu].irq_action = (__u64)action;
	}
}

#endif

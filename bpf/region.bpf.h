// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): where a watched
 * CPU writes its own records. On x86 each watched CPU has a region of its
 * own (struct jw_region), a ring only it writes: the BPF ring buffer's
 * write takes its lock and touches its positions, header and data, lines
 * a housekeeping CPU's reads leave cold; the region's write touches its
 * head and the data, nothing else. Measured under figure 3b's 1 ms
 * interruptions with the kernel's BPF stats, the program that writes an
 * interruption's record ran 55-140 ns shorter with a plain copy than with
 * bpf_ringbuf_output.
 *
 * Only the outermost of our programs on the CPU writes the region (its
 * nest's `active`, which every writer holds, says so): a program that
 * interrupted another of ours writes to the `events` ring buffer, and the
 * collector puts the two back in time order. So the region has one writer
 * at a time and needs no atomic. The head is moved by a plain store after
 * the record's: x86 keeps stores in order, which is why userspace gives
 * regions to x86's watched CPUs only (arm64 needs a store-release, which
 * BPF gained in 6.15); elsewhere region_of[] stays 0 and every record goes
 * to the ring buffer.
 */
#ifndef JITTERWATCH_REGION_BPF_H
#define JITTERWATCH_REGION_BPF_H

#include "common.bpf.h"

/* Every record, with its header, fits in the slack (so never wraps). */
_Static_assert(sizeof(struct jw_event) + 8 <= JW_REGION_SLACK, "a jw_event outgrows the region's slack");
_Static_assert(sizeof(struct jw_batch) + 8 <= JW_REGION_SLACK, "a jw_batch outgrows the region's slack");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* userspace: one per watched CPU */
	__type(key, __u32);
	__type(value, struct jw_region);
} regions SEC(".maps");

/* Each watched CPU's index in `regions`, plus one (0: no region). */
__u32 region_of[JW_MAX_CPUS] = {};

/*
 * What the outermost of our programs on a watched CPU holds. Only it
 * touches the batch and the region: a program that interrupted another of
 * ours (an IRQ while a softirq's program ran) writes to the ring buffer,
 * so no two programs write either at once (NMIs never do). Aligned so
 * that two CPUs never share a cache line.
 */
/*
 * Own-time slots: one per program, so that each carries its own estimate
 * (a reschedule IPI's entry is not a tick's). The system vectors' programs
 * share two kinds, told apart by their sub (enum jw_vector, below 8).
 */
#define JW_OWN_SLOTS 48

static __always_inline __u32 own_slot(__u8 kind, __u8 sub)
{
	if (kind == JW_VECTOR_ENTRY || kind == JW_VECTOR_EXIT)
		return 32 + ((sub & 7) << 1) + (kind == JW_VECTOR_EXIT);
	return kind & 31;
}

struct jw_nest {
	/*
	 * The first line: what every writer on the CPU touches, then the
	 * record's header (offset 40), so that nothing a program reads past
	 * the batch's items costs a line of its own.
	 */
	__u16 active; /* our programs running on this CPU now */
	__u16 depth; /* interrupt levels open: entries less exits */
	__u16 out_est; /* what the record's write took when last timed, ns */
	__u16 pad16;
	__u64 last_t; /* the time of the last item that joined a batch here */
	/* The idle state last entered and written, plus one (0: none yet). */
	__u32 idle_state;
	/*
	 * The IRQ this CPU last named and its action (name_irq()), so a CPU
	 * taking the same IRQ again reads no line of irq_named[]. (An action
	 * freed, another CPU naming its successor, and the same address
	 * taken again for this IRQ would pass here unnamed anew: the
	 * address, for the same IRQ, is then the driver's request again.)
	 */
	__u32 irq;
	__u64 irq_action;
	/*
	 * This CPU's runqueue, as an address (0: not looked up yet), for
	 * read_steal(): found once through the current task, where each read
	 * took three dependent lines (the task's, its cfs_rq's, the rq's).
	 */
	__u64 rq;
	/*
	 * The record itself, built in place (rec.ts: the first item's time,
	 * rec.n: items held) and copied out whole by one helper call: no
	 * copy loop per record size inlined in each program (7.5 KB of code
	 * each before, 3.2 KB since; end to end, no change beyond figure 3b's
	 * noise was measured).
	 */
	struct jw_batch rec;
	/*
	 * Per program (own_slot()), low 16 bits: its own time as last timed,
	 * ns; high 16: its runs, of which every JW_OWN_EVERY-th times itself.
	 * `own` as a program that appended, `wrote` as the one that wrote
	 * the batch (its whole run, the write included).
	 */
	__u32 own[JW_OWN_SLOTS];
	__u32 wrote[JW_OWN_SLOTS];
} __attribute__((aligned(64)));

struct jw_nest nests[JW_MAX_CPUS];

_Static_assert(__builtin_offsetof(struct jw_nest, rec.items) == 64, "the nest's first line outgrows its 64 bytes");

/* The CPU's region, or NULL if it has none (bounds checked here). */
static __always_inline struct jw_region *region_at(__u64 cpu)
{
	__u32 k;

	barrier_var(cpu);
	if (cpu >= JW_MAX_CPUS)
		return NULL;
	k = region_of[cpu];
	if (!k)
		return NULL;
	k -= 1;
	return bpf_map_lookup_elem(&regions, &k);
}

/*
 * Takes the CPU's nest for a record: its region if this is the outermost
 * of our programs there and the CPU has one (hold it until region_put()),
 * else NULL (nothing held).
 */
static __always_inline struct jw_region *region_take(__u64 cpu)
{
	struct jw_region *r = region_at(cpu);

	barrier_var(cpu);
	if (!r || cpu >= JW_MAX_CPUS)
		return NULL;
	/* Plain increments: see batched(). */
	nests[cpu].active += 1;
	if (nests[cpu].active == 1)
		return r;
	nests[cpu].active -= 1;
	return NULL;
}

static __always_inline void region_put(__u64 cpu)
{
	barrier_var(cpu);
	if (cpu < JW_MAX_CPUS)
		nests[cpu].active -= 1;
}

/*
 * Room for a record of `len` bytes (at most JW_REGION_SLACK - 8) at the
 * head, or NULL while the collector has not read that far (a drop, counted
 * by the caller). The writer of the nest only.
 */
static __always_inline void *region_space(struct jw_region *r, __u64 len)
{
	__u64 h = r->head, off;

	/* The collector's tail is the one line here another CPU writes. */
	if (h + 8 + len - *(volatile __u64 *)&r->tail > JW_REGION_BYTES)
		return NULL;
	/* Multiples of 8 (each record is rounded up): masked so, for the verifier. */
	off = h & (JW_REGION_BYTES - 8);
	*(__u64 *)&r->data[off] = len;
	return &r->data[off + 8];
}

/* The record at the head is whole: the collector may read it. */
static __always_inline void region_commit(struct jw_region *r, __u64 len)
{
	/* The record's stores before the head's (x86: in order once emitted). */
	barrier();
	*(volatile __u64 *)&r->head = r->head + 8 + ((len + 7) & ~7ULL);
}

#endif

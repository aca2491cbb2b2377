// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): where a record is
 * written. The two rings, the drop counts every record carries, and
 * reserve_on()/commit(): a watched CPU's own region (region.bpf.h) while
 * it is the outermost of our programs there, else a ring.
 */
#ifndef JITTERWATCH_RECORD_BPF_H
#define JITTERWATCH_RECORD_BPF_H

#include "common.bpf.h"

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

#endif

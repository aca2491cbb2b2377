// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Part of jitterwatch.bpf.c (one object, one skeleton): what every piece
 * reads. The kernel's types (CO-RE), libbpf's helpers, the records
 * (jitterwatch.h), the run's settings and the watched CPUs. Each piece
 * includes the pieces it uses, so none depends on where it is included;
 * jitterwatch.bpf.c includes them in the order that lays out the
 * object's globals as they were measured (figure 3b).
 */
#ifndef JITTERWATCH_COMMON_BPF_H
#define JITTERWATCH_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jitterwatch.h"

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

/* Whether this CPU is watched: the first test of most programs. */
static __always_inline bool watched_here(void)
{
	__u64 cpu = bpf_get_smp_processor_id();

	barrier_var(cpu);
	return cpu < JW_MAX_CPUS && watched[cpu] && !floor_only;
}

/* Before 5.16 the CPU was task_struct.cpu, not thread_info.cpu. */
struct task_struct___old {
	int cpu;
} __attribute__((preserve_access_index));

#endif

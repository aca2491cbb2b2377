//! Figure 3b's C program: a spin loop that keeps its gaps, an IPI sender
//! beside it, and (the paired run) the switch of jitterwatch's watching.

/// The loop and the IPI sender: `interrupts W H SECS PERIOD_US [MAP_ID
/// OFFSET TOGGLE_MS]`.
pub const INTERRUPTS: &str = r#"
/*
 * Spins on CPU W for SECS reading CLOCK_MONOTONIC and prints every gap of
 * 300 ns or more ("G start len"), while a thread on CPU H sends it one
 * function-call IPI every PERIOD_US (membarrier's private expedited
 * command: a cross-CPU call to the CPUs running this process's threads)
 * and prints when ("S time"). The spinning thread is named jwgaps.
 *
 * With MAP_ID, OFFSET and TOGGLE_MS: the loop itself turns jitterwatch's
 * watched[W] (the byte at OFFSET of the BPF array map MAP_ID, its .bss,
 * mmapped) off and on every TOGGLE_MS and prints when ("T time on"). It
 * writes it from user space on W, so no interrupt of W is open at that
 * moment: each interruption is seen whole by the programs, or not at all.
 */
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CAP (1 << 20)
static uint64_t gap_at[CAP], gap_len[CAP], sent[CAP], toggled[CAP];
static size_t ngaps, nsent, ntoggled;
static volatile int done;
static int w, h, period_us;
static double secs;

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void *sender(void *arg)
{
	(void)arg;
	pin(h);
	while (!done) {
		struct timespec d = { 0, period_us * 1000L };
		nanosleep(&d, 0);
		uint64_t t = now();
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 && nsent < CAP)
			sent[nsent++] = t;
	}
	return 0;
}

/* The byte at `offset` of BPF array map `id`'s first value, mapped writable. */
static volatile uint8_t *map_byte(unsigned id, size_t offset)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_id = id;
	int fd = syscall(SYS_bpf, BPF_MAP_GET_FD_BY_ID, &a, sizeof(a));
	if (fd < 0) {
		perror("BPF_MAP_GET_FD_BY_ID");
		exit(1);
	}
	size_t len = (offset / 4096 + 1) * 4096;
	void *m = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap of the map");
		exit(1);
	}
	return (volatile uint8_t *)m + offset;
}

int main(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	w = atoi(argv[1]), h = atoi(argv[2]), secs = atof(argv[3]), period_us = atoi(argv[4]);
	volatile uint8_t *flag = 0;
	uint64_t toggle_ns = 0;
	if (argc >= 8) {
		flag = map_byte(atoi(argv[5]), strtoull(argv[6], 0, 10));
		toggle_ns = strtoull(argv[7], 0, 10) * 1000000u;
	}
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)) {
		perror("membarrier");
		return 1;
	}
	pin(w);
	prctl(PR_SET_NAME, "jwgaps", 0, 0, 0);
	/* Touch what the loop writes, so no page fault lands in it. */
	for (size_t i = 0; i < CAP; i += 512)
		gap_at[i] = gap_len[i] = sent[i] = toggled[i] = 0;
	pthread_t t;
	pthread_create(&t, 0, sender, 0);
	uint64_t t0 = now(), end = t0 + (uint64_t)(secs * 1e9), prev = t0, x;
	uint64_t next_toggle = flag ? t0 : end;
	uint8_t on = 1;
	while ((x = now()) < end) {
		if (x - prev >= 300 && ngaps < CAP) {
			gap_at[ngaps] = prev;
			gap_len[ngaps++] = x - prev;
		}
		if (x >= next_toggle && ntoggled < CAP) {
			on ^= 1;
			*flag = on;
			toggled[ntoggled++] = x * 2 + on;
			next_toggle = x + toggle_ns;
		}
		prev = x;
	}
	if (flag)
		*flag = 1;
	done = 1;
	pthread_join(t, 0);
	for (size_t i = 0; i < ngaps; i++)
		printf("G %llu %llu\n", (unsigned long long)gap_at[i], (unsigned long long)gap_len[i]);
	for (size_t i = 0; i < nsent; i++)
		printf("S %llu\n", (unsigned long long)sent[i]);
	for (size_t i = 0; i < ntoggled; i++)
		printf("T %llu %u\n", (unsigned long long)(toggled[i] / 2), (unsigned)(toggled[i] % 2));
	return 0;
}
"#;

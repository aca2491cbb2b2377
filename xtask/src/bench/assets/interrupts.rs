//! Figure 3b's C program: a spin loop that keeps its gaps, a sender of
//! IPIs and packets beside it, and (the paired run) the switch of
//! jitterwatch's watching.

/// The loop and the sender: `interrupts W H SECS SLOT_US GATEWAY|-
/// [MAP_ID OFFSET TOGGLE_MS [PROG...]]` (PROG as links.h reads it).
pub const INTERRUPTS: &str = r#"
/*
 * Spins on CPU W for SECS reading CLOCK_MONOTONIC and prints every gap of
 * 300 ns or more ("G start len"), while a thread on CPU H makes one
 * interruption of W every SLOT_US, in turn, and prints when:
 * - "S time": a function-call IPI (membarrier's private expedited command:
 *   a cross-CPU call to the CPUs running this process's threads);
 * - "U time": with a GATEWAY (an IPv4 address, not "-"), a UDP datagram to
 *   its discard port: once the NIC has sent it, its send-completion
 *   interrupt and the NET_RX softirq that reaps it run on W, where that
 *   interrupt is routed (no answer is needed: gateways rate-limit theirs);
 * - "R time": a reschedule IPI: a signal to the spinning thread, which
 *   runs there, so the kernel kicks W with one (kick_process) and the
 *   thread runs an empty handler; no switch. (A nice change would not do:
 *   with one runnable task the scheduler sends nothing);
 * - "W time": one workqueue item on W (a write to /proc/sys/vm/stat_refresh
 *   runs refresh_vm_stats on every CPU): a kworker preempts the loop;
 * - "D time": the function-call IPI again, WARM_US after another one has
 *   returned (membarrier waits for its call to end on W): what the same
 *   interruption costs with the lines it and our programs touch still in
 *   W's caches, where each of the others finds them as a millisecond of
 *   spinning and the host's pauses left them. The first of the two is
 *   "P time": its gap is no kind's.
 * The spinning thread is named jwgaps.
 *
 * With MAP_ID, OFFSET and TOGGLE_MS: the loop itself turns jitterwatch's
 * watched[W] (the byte at OFFSET of the BPF array map MAP_ID, its .bss,
 * mmapped) off and on every TOGGLE_MS and prints when ("T time code": 1
 * on, 0 off). It writes it from user space on W, so no interrupt of W is
 * open at that moment: each interruption is seen whole by the programs, or
 * not at all. With PROGs (jitterwatch attached none of its programs:
 * JITTERWATCH_BPF_UNATTACHED), the loop opens each program's one link
 * (links.h) before it spins, and each off window is followed by a third
 * (code 4): the links closed, no hook at all, opened again as it ends; the
 * links' system calls are no gap of the loop's.
 */
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <arpa/inet.h>
#include <linux/membarrier.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "links.h"
#include "map_byte.h"

#define CAP (1 << 20)
static uint64_t gap_at[CAP], gap_len[CAP], toggled[CAP];
static size_t ngaps, ntoggled;
/* What the sender did and when, as "K time" lines: K is one of SURW. */
static uint64_t did_at[CAP];
static char did[CAP];
static size_t ndid;
static pid_t spinner;
static int refresh_fd = -1;
static struct sockaddr_in gateway;
static int has_gateway;
static volatile int done;
#define WARM_US 20
static int w, h, slot_us;
static double secs;

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void on_signal(int sig)
{
	(void)sig;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void note(char kind, uint64_t t)
{
	if (ndid < CAP) {
		did[ndid] = kind;
		did_at[ndid++] = t;
	}
}

/* One datagram to the gateway's discard port (a refusal the gateway
 * sent back for an earlier one fails a send: not counted). */
static void dial(int fd)
{
	uint64_t t = now();
	if (send(fd, "x", 1, MSG_DONTWAIT) == 1)
		note('U', t);
}

static void *sender(void *arg)
{
	(void)arg;
	pin(h);
	int udp = -1;
	if (has_gateway) {
		udp = socket(AF_INET, SOCK_DGRAM, 0);
		if (udp >= 0 && connect(udp, (struct sockaddr *)&gateway, sizeof(gateway)))
			udp = -1;
	}
	for (unsigned k = 0; !done; k++) {
		struct timespec d = { 0, slot_us * 1000L };
		nanosleep(&d, 0);
		uint64_t t = now();
		switch (k % 5) {
		case 0:
			if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
				note('S', t);
			break;
		case 1:
			if (udp >= 0)
				dial(udp);
			break;
		case 2:
			if (syscall(SYS_tgkill, getpid(), spinner, SIGUSR1) == 0)
				note('R', t);
			break;
		case 3:
			if (refresh_fd >= 0 && pwrite(refresh_fd, "1\n", 2, 0) == 2)
				note('W', t);
			break;
		case 4:
			if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
				break;
			note('P', t);
			/* W is back in its loop by now: the two gaps never merge. */
			for (uint64_t until = now() + WARM_US * 1000; now() < until;)
				;
			t = now();
			if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
				note('D', t);
			break;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	w = atoi(argv[1]), h = atoi(argv[2]), secs = atof(argv[3]), slot_us = atoi(argv[4]);
	spinner = getpid();
	signal(SIGUSR1, on_signal);
	refresh_fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);
	if (strcmp(argv[5], "-")) {
		gateway.sin_family = AF_INET;
		gateway.sin_port = htons(9);
		if (inet_pton(AF_INET, argv[5], &gateway.sin_addr) != 1) {
			fprintf(stderr, "not an IPv4 address: %s\n", argv[5]);
			return 2;
		}
		has_gateway = 1;
	}
	volatile uint8_t *flag = 0;
	uint64_t toggle_ns = 0;
	if (argc >= 9) {
		flag = map_byte(atoi(argv[6]), strtoull(argv[7], 0, 10));
		toggle_ns = strtoull(argv[8], 0, 10) * 1000000u;
		for (int i = 9; i < argc; i++)
			if (open_prog(argv[i]))
				return 1;
		/* The only links: without them nothing is watched at all. */
		if (progs && attach_all())
			return 1;
	}
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)) {
		perror("membarrier");
		return 1;
	}
	pin(w);
	prctl(PR_SET_NAME, "jwgaps", 0, 0, 0);
	/* Touch what the loop writes, so no page fault lands in it. */
	for (size_t i = 0; i < CAP; i += 512)
		gap_at[i] = gap_len[i] = did_at[i] = toggled[i] = did[i] = 0;
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
			int calls = on == 4 || (on == 0 && progs);
			if (on == 4 && attach_all())
				return 1;
			if (on == 0 && progs)
				detach_all();
			/* 1 watched, then 0 not, then 4 no hook at all. */
			on = on == 1 ? 0 : on == 0 && progs ? 4 : 1;
			*flag = on == 1;
			/* The window begins once the links' system calls are done. */
			if (calls)
				x = now();
			toggled[ntoggled++] = x * 8 + on;
			next_toggle = x + toggle_ns;
		}
		prev = x;
	}
	if (progs && on != 4)
		detach_all();
	if (flag)
		*flag = 1;
	done = 1;
	pthread_join(t, 0);
	for (size_t i = 0; i < ngaps; i++)
		printf("G %llu %llu\n", (unsigned long long)gap_at[i], (unsigned long long)gap_len[i]);
	for (size_t i = 0; i < ndid; i++)
		printf("%c %llu\n", did[i], (unsigned long long)did_at[i]);
	for (size_t i = 0; i < ntoggled; i++)
		printf("T %llu %u\n", (unsigned long long)(toggled[i] / 8), (unsigned)(toggled[i] % 8));
	return 0;
}
"#;

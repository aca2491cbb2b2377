//! The host's speed on a fixed piece of work, measured beside every run:
//! this guest's host has run the same code 1.6-1.8× slower on one day than
//! on another (figure 7's replay of 4beb187 gave 23.7 M events/s when it
//! was benched, 13.5-15.7 M two days later, unchanged), which a figure
//! alone cannot tell from a change of ours. Two numbers, each what the
//! collector is made of: a random pointer chase over 32 MiB (ns a load:
//! the cache and memory misses most of its time goes to) and a chain of
//! dependent multiply-adds (ns a step: the core's clock and its share of
//! it). Prints `chase_ns=… alu_ns=…`; run pinned to one CPU.
pub const YARDSTICK: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ENTRIES (32u << 20 >> 2)
#define CHASE_STEPS (1u << 22)
#define ALU_STEPS (1u << 27)

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(void)
{
	uint32_t *next = malloc(sizeof(uint32_t) * ENTRIES);
	uint32_t *order = malloc(sizeof(uint32_t) * ENTRIES);
	uint64_t seed = 0x9e3779b97f4a7c15ull, x = 1, t0;
	uint32_t i, at = 0;

	if (!next || !order)
		return 1;
	/* One cycle through every entry, in a shuffled order (a fixed seed:
	 * the same walk every run). */
	for (i = 0; i < ENTRIES; i++)
		order[i] = i;
	for (i = ENTRIES - 1; i > 0; i--) {
		uint32_t j, t;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		j = (uint32_t)(seed % (i + 1));
		t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (i = 0; i < ENTRIES; i++)
		next[order[i]] = order[(i + 1) % ENTRIES];
	/* A first lap warms the TLB as much as it can be. */
	for (i = 0; i < CHASE_STEPS / 4; i++)
		at = next[at];
	t0 = now();
	for (i = 0; i < CHASE_STEPS; i++)
		at = next[at];
	double chase = (double)(now() - t0) / CHASE_STEPS;
	t0 = now();
	for (i = 0; i < ALU_STEPS; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	double alu = (double)(now() - t0) / ALU_STEPS;
	/* Both results printed, so neither loop is optimised away. */
	printf("chase_ns=%.3f alu_ns=%.4f end=%u x=%llu\n", chase, alu, at, (unsigned long long)(x & 1));
	return 0;
}
"#;

/*
 * The C side of wirespeed-dpdk-lpm: DPDK's LPM lookups are static inline functions in its
 * headers (rte_lpm_lookup, rte_lpm_lookup_bulk_func), which Rust cannot call, so they are
 * compiled here, each inside a loop over a whole array of addresses. One call per array, not
 * per lookup: the benchmark then compares DPDK's inlined loop with wirespeed's inlined loop,
 * not a lookup with a function call. Results are hop ids, WS_LPM_MISS for no route.
 */
/* pthread_{get,set}affinity_np and the CPU_* macros. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#define WS_LPM_MISS UINT32_MAX
/* Addresses per bulk call: one worker batch, as wirespeed's lookup_batch is used. */
#define WS_BULK 32

/*
 * rte_eal_init, keeping the calling thread's CPU affinity: EAL pins the thread that initialises
 * it to the main lcore, and a benchmark or test thread must stay where its caller put it.
 * `argv` is the program name and EAL's options without -l, which is added here. Returns
 * rte_eal_init's result, or minus rte_errno when it failed.
 */
int ws_eal_init(int argc, char **argv)
{
	cpu_set_t saved;
	if (pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) != 0)
		return -EINVAL;
	/* One lcore, the first CPU this thread may run on: no EAL worker threads. */
	int cpu = 0;
	while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &saved))
		cpu++;
	char lcore[16];
	snprintf(lcore, sizeof(lcore), "%d", cpu);
	char *args[64];
	if (argc < 1 || argc > 60)
		return -E2BIG;
	for (int i = 0; i < argc; i++)
		args[i] = argv[i];
	args[argc] = "-l";
	args[argc + 1] = lcore;
	args[argc + 2] = NULL;
	int ret = rte_eal_init(argc + 2, args);
	int error = rte_errno;
	pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	return ret < 0 ? -error : ret;
}

/* Bytes allocated on every socket's DPDK heap (a table's size is the difference it makes). */
uint64_t ws_heap_allocated(void)
{
	uint64_t total = 0;
	for (unsigned int i = 0; i < rte_socket_count(); i++) {
		struct rte_malloc_socket_stats stats;
		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &stats) == 0)
			total += stats.heap_allocsz_bytes;
	}
	return total;
}

int ws_last_error(void)
{
	return rte_errno;
}

struct rte_lpm *ws_lpm_create(const char *name, uint32_t max_rules, uint32_t tbl8s)
{
	struct rte_lpm_config config = {
		.max_rules = max_rules,
		.number_tbl8s = tbl8s,
		.flags = 0,
	};
	return rte_lpm_create(name, SOCKET_ID_ANY, &config);
}

int ws_lpm_add(struct rte_lpm *lpm, uint32_t ip, uint8_t depth, uint32_t hop)
{
	return rte_lpm_add(lpm, ip, depth, hop);
}

void ws_lpm_free(struct rte_lpm *lpm)
{
	rte_lpm_free(lpm);
}

/* One rte_lpm_lookup per address. */
void ws_lpm_lookup_each(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t *hops, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t hop;
		hops[i] = rte_lpm_lookup(lpm, ips[i], &hop) == 0 ? hop : WS_LPM_MISS;
	}
}

/* rte_lpm_lookup_bulk over steps of WS_BULK addresses, its flagged entries turned into hops. */
void ws_lpm_lookup_bulk(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t *hops, size_t n)
{
	for (size_t at = 0; at < n; at += WS_BULK) {
		unsigned int count = n - at < WS_BULK ? (unsigned int)(n - at) : WS_BULK;
		rte_lpm_lookup_bulk(lpm, ips + at, hops + at, count);
		for (unsigned int i = 0; i < count; i++) {
			uint32_t entry = hops[at + i];
			hops[at + i] = entry & RTE_LPM_LOOKUP_SUCCESS ? entry & 0x00ffffff : WS_LPM_MISS;
		}
	}
}

struct rte_lpm6 *ws_lpm6_create(const char *name, uint32_t max_rules, uint32_t tbl8s)
{
	struct rte_lpm6_config config = {
		.max_rules = max_rules,
		.number_tbl8s = tbl8s,
		.flags = 0,
	};
	return rte_lpm6_create(name, SOCKET_ID_ANY, &config);
}

int ws_lpm6_add(struct rte_lpm6 *lpm, const uint8_t *ip, uint8_t depth, uint32_t hop)
{
	return rte_lpm6_add(lpm, ip, depth, hop);
}

void ws_lpm6_free(struct rte_lpm6 *lpm)
{
	rte_lpm6_free(lpm);
}

/* One rte_lpm6_lookup per address (16 bytes each, network order, as in a packet). */
void ws_lpm6_lookup_each(const struct rte_lpm6 *lpm, const uint8_t (*ips)[16], uint32_t *hops,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t hop;
		hops[i] = rte_lpm6_lookup(lpm, ips[i], &hop) == 0 ? hop : WS_LPM_MISS;
	}
}

/* rte_lpm6_lookup_bulk_func over steps of WS_BULK addresses (-1 there is a miss). */
void ws_lpm6_lookup_bulk(const struct rte_lpm6 *lpm, const uint8_t (*ips)[16], uint32_t *hops,
			 size_t n)
{
	for (size_t at = 0; at < n; at += WS_BULK) {
		unsigned int count = n - at < WS_BULK ? (unsigned int)(n - at) : WS_BULK;
		int32_t found[WS_BULK];
		/* The function takes a non-const array but only reads it. */
		rte_lpm6_lookup_bulk_func(lpm, (uint8_t (*)[16])ips + at, found, count);
		for (unsigned int i = 0; i < count; i++)
			hops[at + i] = found[i] < 0 ? WS_LPM_MISS : (uint32_t)found[i];
	}
}

/* kv/engine_int.h - private structures of the KV engine (engine.c, engine_stats.c). */
#ifndef OL_KV_ENGINE_INT_H
#define OL_KV_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv/engine.h"
#include "kv/spill.h"

#define NCLS	   18
#define PG_FREE	   (-1)
#define PG_LARGE   (-2)
#define PG_TAIL	   (-3)
#define CLS_LARGE  (-1)
#define ST_PENDING 0
#define ST_LIVE	   1
#define ST_DEAD	   2

struct ent {
	struct ol_kvk k;
	uint64_t h;
	struct ent *hnext;
	struct ent *lprev, *lnext; /* DRAM LRU: head = least recently used */
	struct ent *dprev, *dnext; /* dirty FIFO */
	uint64_t len, ver;
	uint64_t off, seq; /* DRAM slot, off = OL_KVE_NOOFF when not in DRAM */
	uint64_t put_ms;   /* when it was committed (dirty since then): the backlog's age */
	int cls;
	uint32_t npages, pins;
	uint8_t state;
	bool dirty, in_lru, in_dirty;
	bool wb;     /* in the write-behind batch being written (holds one pin) */
	bool nv_hit; /* NVMe only, served once to TCP without promotion: the next hit promotes */
	struct ol_kvs_loc loc; /* NVMe copy; seg 0 = none */
};

struct slot {
	uint64_t off, seq;
	int cls;
	uint32_t npages;
	bool fresh; /* its pages were never touched: prefault them */
};

struct page {
	int16_t cls;
	bool faulted; /* prefaulted in our mapping */
	uint32_t used;
	uint32_t run;
};

struct sclass {
	uint64_t size;
	uint64_t *free; /* stack of free slot offsets */
	size_t nfree, cap;
};

struct ol_kve {
	pthread_mutex_t mu;
	uint8_t *base;
	uint64_t size, data_off;
	bool is_shm;
	int shm_fd; /* open and flock()ed while the tier lives */
	char shm_name[256];
	uint32_t n_pages;
	_Atomic uint64_t *seqtab;
	struct page *pages;
	struct sclass cls[NCLS];
	struct ent **ent_at; /* per unit: the entry whose slot starts there */
	uint64_t *tag;	     /* per unit: namespace tag of the bytes it holds (0 = never used) */
	struct ent **ht;
	uint64_t ht_mask, n_ent;
	struct ent *lru_head, *lru_tail, *dirty_head, *dirty_tail;
	uint64_t gseq, gver, epoch, max_block, dram_used, dram_entries, nvme_entries;
	struct ol_kvs *spill;
	/* write-behind: one thread (or the closer, after it stopped) writes the dirty FIFO in
	 * batches and broadcasts clean_cv after every batch. async: a put never waits for it
	 * (a dirty LRU victim is dropped unwritten, counted); strict: a put waits on clean_cv
	 * until its own block is written, and for a dirty victim to be written */
	pthread_t wb;
	pthread_cond_t wb_cv, clean_cv;
	bool wb_running, stop, wb_kick, wb_active;
	bool strict;
	unsigned wb_ms;
	uint64_t wb_bps;	/* write-behind bandwidth cap, bytes per second (0 = none) */
	uint64_t dirty_q_bytes; /* value bytes queued on the dirty FIFO */
	uint64_t dirty_q_n;	/* blocks queued on the dirty FIFO */
	uint64_t wb_bytes;	/* value bytes in the batch being written */
	uint64_t wb_n;		/* blocks in the batch being written */
	uint64_t wb_oldest_ms;	/* put_ms of the oldest block in that batch */
	struct ol_kvs_item *wb_items;
	struct ent **wb_ents;
	/* background prefault of the DRAM tier (low priority, stopped by close) */
	pthread_t pf;
	bool pf_running;
	_Atomic bool pf_stop;
	struct ol_kve_stats st;
};

#endif

/* kv/engine_slab.c - the DRAM tier of the KV engine: the shm mapping, size-class slots in
 * 2 MiB pages, slot sequence numbers, first-touch prefault. One mutex (amu), held only while
 * a slot is taken or freed: never across a copy, an eviction or an I/O. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "base/log.h"
#include "kv/barrier.h"
#include "kv/engine_int.h"
#include "openlake/openlake.h"

void
ol_kve_slab_init(struct ol_kve *e)
{
	uint64_t s = 8192;
	e->cls[0].size = 4096;
	for (int c = 1; c < NCLS; c += 2, s *= 2) {
		e->cls[c].size = s;
		if (c + 1 < NCLS)
			e->cls[c + 1].size = s + s / 2;
	}
	e->cls[NCLS - 1].size = OL_KVE_PAGE;
	pthread_mutex_init(&e->amu, NULL);
	e->warm_fd = memfd_create("openlake-kv-warm", MFD_CLOEXEC); /* -1: no kernel-mode touch */
}

void
ol_kve_slab_fini(struct ol_kve *e)
{
	for (int c = 0; c < NCLS; c++)
		free(e->cls[c].free);
	free(e->pages);
	if (e->warm_fd >= 0)
		close(e->warm_fd);
	pthread_mutex_destroy(&e->amu);
}

static int
class_for(const struct ol_kve *e, uint64_t len)
{
	for (int c = 0; c < NCLS; c++)
		if (len <= e->cls[c].size)
			return c;
	return CLS_LARGE;
}

static uint64_t
slot_bytes(const struct ol_kve *e, const struct slot *s)
{
	return s->cls == CLS_LARGE ? (uint64_t)s->npages * OL_KVE_PAGE : e->cls[s->cls].size;
}

static uint32_t
page_of(const struct ol_kve *e, uint64_t off)
{
	return (uint32_t)((off - e->data_off) / OL_KVE_PAGE);
}

static void
cls_push(struct sclass *c, uint64_t off)
{
	if (c->nfree == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 64;
		c->free = ol_xrealloc(c->free, c->cap * sizeof(*c->free));
	}
	c->free[c->nfree++] = off;
}

static bool
page_carve(struct ol_kve *e, int ci)
{
	struct sclass *c = &e->cls[ci];
	for (uint32_t p = 0; p < e->n_pages; p++) {
		if (e->pages[p].cls != PG_FREE)
			continue;
		e->pages[p].cls = (int16_t)ci;
		e->pages[p].used = 0;
		uint64_t n = OL_KVE_PAGE / c->size, base = e->data_off + (uint64_t)p * OL_KVE_PAGE;
		for (uint64_t i = n; i-- > 0;)
			cls_push(c, base + i * c->size);
		return true;
	}
	return false;
}

static bool
large_take(struct ol_kve *e, uint32_t np, uint64_t *off)
{
	uint32_t run = 0;
	for (uint32_t p = 0; p < e->n_pages; p++) {
		run = e->pages[p].cls == PG_FREE ? run + 1 : 0;
		if (run < np)
			continue;
		uint32_t first = p + 1 - np;
		for (uint32_t q = first; q <= p; q++)
			e->pages[q].cls = q == first ? PG_LARGE : PG_TAIL;
		e->pages[first].run = np;
		*off = e->data_off + (uint64_t)first * OL_KVE_PAGE;
		return true;
	}
	return false;
}

/* Claim the first touch of a slot's pages: true when one of them was never touched (the
 * caller then prefaults them with one madvise, outside the lock, instead of 512 faults). */
static bool
claim_fresh(struct ol_kve *e, uint64_t off, uint32_t np)
{
	bool fresh = false;
	for (uint32_t p = page_of(e, off), q = p + np; p < q; p++) {
		fresh |= !e->pages[p].faulted;
		e->pages[p].faulted = true;
	}
	return fresh;
}

/* An atomic add of 0 at p. On x86-64 the locked instruction itself, which ThreadSanitizer does
 * not see: it races on purpose with a client (another thread, in the unit tests) writing its
 * slot in the same page, and changes nothing that write could lose. */
static inline void
touch_word(uint8_t *p)
{
#if defined(__x86_64__)
	__asm__ volatile("lock; addq $0, %0" : "+m"(*(uint64_t *)p) : : "memory");
#else
	atomic_fetch_add_explicit((_Atomic uint64_t *)p, 0, memory_order_relaxed);
#endif
}

/* Populate [p, p + len) (page-aligned) and access each 4 KiB page of it once from this process,
 * from user mode and from kernel mode. MADV_POPULATE_WRITE allocates the pages and fills our
 * page table, but on a guest whose hypervisor shadows page tables (this VM: PVM) the first
 * access of each page through our mapping still traps to the host, ~10-35 us per 4 KiB page,
 * and it does so separately for user-mode accesses (the write-behind's copy out of a slot)
 * and for kernel-mode ones (a TCP put's recv into the slot, a TCP get's send from it):
 * bench/first_touch.c. That was most of a put's cost on a fresh tier. The user-mode touch is
 * an atomic add of 0 (a write that changes nothing: safe on a page a client may be writing
 * meanwhile); the kernel-mode one is a write(2) of the range into a scratch memfd (the kernel
 * reads every page; the scratch's contents do not matter). Elsewhere each is cheap: one op
 * per 4 KiB page and one copy of the range. */
static int
touch_range(struct ol_kve *e, uint8_t *p, uint64_t len)
{
	if (madvise(p, len, MADV_POPULATE_WRITE) != 0)
		return -errno;
	for (uint64_t o = 0; o < len; o += OL_KVE_UNIT)
		touch_word(p + o);
	/* the raw syscall, not libc's pwrite: the kernel reads the pages while a client may write
	 * them (the scratch's contents do not matter), which a sanitizer's pwrite interceptor
	 * would report as a race */
	for (uint64_t o = 0; e->warm_fd >= 0 && o < len; o += OL_KVE_PAGE) {
		uint64_t n = len - o < OL_KVE_PAGE ? len - o : OL_KVE_PAGE;
		if (syscall(SYS_pwrite64, e->warm_fd, p + o, (size_t)n, (off_t)0) < 0)
			break; /* best effort: only this VM's kernel-mode first touch is left */
	}
	return 0;
}

void
ol_kve_slot_prefault(struct ol_kve *e, const struct slot *s)
{
	uint64_t start = e->data_off + (uint64_t)page_of(e, s->off) * OL_KVE_PAGE;
	(void)touch_range(e, e->base + start, (uint64_t)s->npages * OL_KVE_PAGE);
}

static bool
slot_try(struct ol_kve *e, struct slot *s)
{
	if (s->cls == CLS_LARGE)
		return large_take(e, s->npages, &s->off);
	struct sclass *c = &e->cls[s->cls];
	if (c->nfree == 0 && !page_carve(e, s->cls))
		return false;
	s->off = c->free[--c->nfree];
	e->pages[page_of(e, s->off)].used++;
	return true;
}

int
ol_kve_slot_take(struct ol_kve *e, uint64_t len, unsigned sid, struct slot *s)
{
	s->cls = class_for(e, len);
	s->npages = s->cls == CLS_LARGE ? (uint32_t)((len + OL_KVE_PAGE - 1) / OL_KVE_PAGE) : 1;
	if (s->npages > e->n_pages)
		return -ENOSPC;
	pthread_mutex_lock(&e->amu);
	if (!slot_try(e, s)) {
		pthread_mutex_unlock(&e->amu);
		return -EAGAIN;
	}
	s->fresh = claim_fresh(e, s->off, s->npages);
	s->seq = (++e->gseq << SEQ_SID_BITS) | sid;
	e->ent_at[s->off / OL_KVE_UNIT] = NULL;
	atomic_store_explicit(&e->seqtab[s->off / OL_KVE_UNIT], s->seq, memory_order_release);
	ol_fence_store();
	e->dram_used += slot_bytes(e, s);
	pthread_mutex_unlock(&e->amu);
	return 0;
}

void
ol_kve_slot_reseq(struct ol_kve *e, struct slot *s, unsigned sid)
{
	pthread_mutex_lock(&e->amu);
	s->seq = (++e->gseq << SEQ_SID_BITS) | sid;
	atomic_store_explicit(&e->seqtab[s->off / OL_KVE_UNIT], s->seq, memory_order_release);
	pthread_mutex_unlock(&e->amu);
}

static void
page_reclaim(struct ol_kve *e, uint32_t p)
{
	struct sclass *c = &e->cls[e->pages[p].cls];
	uint64_t lo = e->data_off + (uint64_t)p * OL_KVE_PAGE, hi = lo + OL_KVE_PAGE;
	size_t j = 0;
	for (size_t i = 0; i < c->nfree; i++)
		if (c->free[i] < lo || c->free[i] >= hi)
			c->free[j++] = c->free[i];
	c->nfree = j;
	e->pages[p].cls = PG_FREE;
}

void
ol_kve_slot_free(struct ol_kve *e, const struct slot *s)
{
	pthread_mutex_lock(&e->amu);
	atomic_store_explicit(&e->seqtab[s->off / OL_KVE_UNIT], 0, memory_order_release);
	e->ent_at[s->off / OL_KVE_UNIT] = NULL;
	e->dram_used -= slot_bytes(e, s);
	uint32_t p = page_of(e, s->off);
	if (s->cls == CLS_LARGE) {
		for (uint32_t q = p; q < p + s->npages; q++)
			e->pages[q].cls = PG_FREE;
	} else {
		cls_push(&e->cls[s->cls], s->off);
		if (--e->pages[p].used == 0)
			page_reclaim(e, p);
	}
	pthread_mutex_unlock(&e->amu);
}

int
ol_kve_map_dram(struct ol_kve *e, const struct ol_kve_opts *o)
{
	uint64_t pages = o->dram_bytes / OL_KVE_PAGE;
	e->n_pages = (uint32_t)(pages ? pages : 1);
	uint64_t data = (uint64_t)e->n_pages * OL_KVE_PAGE, d = OL_KVE_PAGE;
	while ((d + data) / OL_KVE_UNIT * 8 > d)
		d += OL_KVE_PAGE;
	e->data_off = d;
	e->size = d + data;
	void *p;
	if (o->shm_name && o->shm_name[0]) {
		snprintf(e->shm_name, sizeof(e->shm_name), "%s", o->shm_name);
		/* a leftover of a crashed run */
		int rc = ol_kve_shm_unlink_stale(e->shm_name, true);
		if (rc < 0)
			return rc;
		int fd = shm_open(e->shm_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		/* held while the tier lives: the mark of a live object, in any PID namespace;
		 * taken before the object has its size (a cleaner that holds the lock of an
		 * empty object for a moment leaves it alone: then we wait) */
		if (flock(fd, LOCK_EX) != 0 || ftruncate(fd, (off_t)e->size) != 0 ||
		    (o->shm_group &&
		     (fchown(fd, (uid_t)-1, o->shm_gid) != 0 || fchmod(fd, 0660) != 0))) {
			rc = -errno;
			close(fd);
			shm_unlink(e->shm_name);
			return rc;
		}
		p = mmap(NULL, e->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
		e->shm_fd = fd;
		e->is_shm = true;
	} else {
		p = mmap(NULL, e->size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, e->size, MADV_HUGEPAGE); /* best effort: THP for shmem may be off */
	e->base = p;
	e->seqtab = (_Atomic uint64_t *)p;
	e->pages = ol_xcalloc(e->n_pages, sizeof(*e->pages));
	for (uint32_t i = 0; i < e->n_pages; i++)
		e->pages[i].cls = PG_FREE;
	return 0;
}

/* Memory is short: under a quarter of RAM free, or of the shm file system. Prefaulting then
 * would take memory that other processes (or the tier's own puts) need sooner. */
static bool
memory_short(const struct ol_kve *e)
{
	struct sysinfo si;
	struct statvfs sv;
	if (sysinfo(&si) == 0 && si.freeram < si.totalram / 4)
		return true;
	return e->is_shm && statvfs("/dev/shm", &sv) == 0 && sv.f_bavail < sv.f_blocks / 4;
}

/* Populate the DRAM tier page by page at the lowest priority, so that puts after start do not
 * pay this machine's first touch of shared memory. A page a put claimed first is skipped;
 * populating a page in use is harmless (it writes nothing). Stops at close, when memory runs
 * short, or on the first failure: the rest is populated by use, as without this thread. */
void *
ol_kve_prefault_main(void *arg)
{
	struct ol_kve *e = arg;
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	if (touch_range(e, e->base, e->data_off) != 0) /* the sequence table */
		return NULL;
	for (uint32_t p = 0; p < e->n_pages && !atomic_load(&e->pf_stop); p++) {
		if (p % 64 == 0 && memory_short(e)) {
			ol_info(
			    "kv: prefault of the DRAM tier stopped at page %u of %u: memory short",
			    p, e->n_pages);
			break;
		}
		pthread_mutex_lock(&e->amu);
		bool todo = !e->pages[p].faulted;
		e->pages[p].faulted = true;
		pthread_mutex_unlock(&e->amu);
		uint8_t *at = e->base + e->data_off + (uint64_t)p * OL_KVE_PAGE;
		int rc = todo ? touch_range(e, at, OL_KVE_PAGE) : 0;
		if (rc < 0) {
			ol_warn("kv: prefault of the DRAM tier stopped at page %u of %u: %s", p,
				e->n_pages, strerror(-rc));
			break;
		}
		pthread_mutex_lock(&e->amu);
		e->prefaulted += todo; /* counted once touched: kv_bench.sh waits for all */
		pthread_mutex_unlock(&e->amu);
	}
	return NULL;
}

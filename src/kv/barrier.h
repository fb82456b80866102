/* kv/barrier.h - the two fences of the shm sequence protocol, spelled per architecture so
 * the code also builds with -fsanitize=thread (which rejects atomic_thread_fence).
 *   ol_fence_load():  earlier loads (the copy out of a slot) complete before later loads (the
 *                     re-read of the slot's sequence number).
 *   ol_fence_store(): earlier stores (a slot's new sequence number) are visible before later
 *                     stores (the new owner's bytes). */
#ifndef OL_KV_BARRIER_H
#define OL_KV_BARRIER_H

#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
/* x86-TSO keeps load-load and store-store order: stop the compiler only */
#define ol_fence_load()	 __asm__ __volatile__("" ::: "memory")
#define ol_fence_store() __asm__ __volatile__("" ::: "memory")
#elif defined(__aarch64__)
#define ol_fence_load()	 __asm__ __volatile__("dmb ishld" ::: "memory")
#define ol_fence_store() __asm__ __volatile__("dmb ishst" ::: "memory")
#else
#define ol_fence_load()	 atomic_thread_fence(memory_order_seq_cst)
#define ol_fence_store() atomic_thread_fence(memory_order_seq_cst)
#endif

#endif

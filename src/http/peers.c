/* http/peers.c - per client address counts (connections, requests in flight): a chained hash
 * keyed by the IP address (IPv4 as v4-mapped IPv6), an entry lives while it counts anything. */
#include "http/internal.h"

#include "base/log.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

void
ol_http_peer_key(const struct sockaddr *sa, uint8_t key[16])
{
	memset(key, 0, 16);
	if (sa->sa_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

static size_t
bucket(const struct ol_http_peers *t, const uint8_t key[16])
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 1099511628211ull;
	return (size_t)(h % t->nb);
}

void
ol_http_peers_init(struct ol_http_peers *t, size_t nbuckets)
{
	t->nb = nbuckets ? nbuckets : 1;
	t->n = 0;
	t->b = ol_xcalloc(t->nb, sizeof(*t->b));
}

void
ol_http_peers_fini(struct ol_http_peers *t)
{
	for (size_t i = 0; t->b && i < t->nb; i++) {
		while (t->b[i]) {
			struct ol_http_peer *p = t->b[i];
			t->b[i] = p->next;
			free(p);
		}
	}
	free(t->b);
	t->b = NULL;
	t->n = 0;
}

struct ol_http_peer *
ol_http_peers_get(struct ol_http_peers *t, const uint8_t key[16])
{
	size_t i = bucket(t, key);
	for (struct ol_http_peer *p = t->b[i]; p; p = p->next)
		if (!memcmp(p->key, key, 16))
			return p;
	struct ol_http_peer *p = ol_xcalloc(1, sizeof(*p));
	memcpy(p->key, key, 16);
	p->next = t->b[i];
	t->b[i] = p;
	t->n++;
	return p;
}

void
ol_http_peers_put(struct ol_http_peers *t, struct ol_http_peer *p)
{
	if (p->conns || __atomic_load_n(&p->inflight, __ATOMIC_RELAXED))
		return;
	struct ol_http_peer **pp = &t->b[bucket(t, p->key)];
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = p->next;
		t->n--;
		free(p);
	}
}

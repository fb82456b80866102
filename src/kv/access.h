/* kv/access.h - who may use the KV pool (internal to kv/): the pool secret and per-tenant
 * tokens checked by HMAC challenge-response at HELLO/AUTH, and the peer-credential check that
 * gates the shared-memory grant on the Unix socket. Thread-safe after ol_kva_init (read only).
 */
#ifndef OL_KV_ACCESS_H
#define OL_KV_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "kv/proto.h"

struct ol_kva_token {
	char token[OL_CFG_STR];
	char namespaces[1024]; /* comma-separated fnmatch patterns; "*" for the pool secret */
};

struct ol_kva {
	struct ol_kva_token toks[OL_CFG_MAX_KV_TOKENS + 1];
	unsigned n_toks;
	uid_t uid;    /* the daemon's euid: its peers get the shm grant */
	bool has_gid; /* [kv] shm_group: members get it too */
	gid_t gid;
};

/* From cfg->kv_secret, kv_tokens, kv_shm_group. 0 or -EINVAL (unknown group, logged). */
int ol_kva_init(struct ol_kva *a, const struct ol_config *cfg);
/* Access control on: a connection must AUTH before any op but HELLO. */
bool ol_kva_on(const struct ol_kva *a);
/* Check an AUTH mac for namespace ns against every token. 0 = a token matches and may touch
 * ns, -EACCES = a token matches but not for ns, -EKEYREJECTED = no token matches. */
int ol_kva_check(const struct ol_kva *a, const uint8_t nonce[OL_KVP_NONCE], const char *ns,
		 uint16_t ns_len, const uint8_t mac[OL_KVP_MAC]);
/* Whether the peer of Unix socket fd may map the shm tier: same uid as the daemon, root, or
 * a member of the shm group (primary or supplementary, read from /proc/PID/status). */
bool ol_kva_peer_local(const struct ol_kva *a, int fd);

#endif

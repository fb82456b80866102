/* kv/access.c - KV pool tokens (HMAC-SHA256 challenge-response) and the shm grant's peer check.
 */
#include "kv/access.h"

#include <errno.h>
#include <fnmatch.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/log.h"

int
ol_kva_init(struct ol_kva *a, const struct ol_config *cfg)
{
	memset(a, 0, sizeof(*a));
	a->uid = geteuid();
	if (cfg->kv_secret[0]) {
		snprintf(a->toks[0].token, sizeof(a->toks[0].token), "%s", cfg->kv_secret);
		snprintf(a->toks[0].namespaces, sizeof(a->toks[0].namespaces), "*");
		a->n_toks = 1;
	}
	for (unsigned i = 0; i < cfg->n_kv_tokens; i++) {
		if (!cfg->kv_tokens[i].token[0]) {
			ol_err("kv: [[kv.tokens]] entry %u has no token", i + 1);
			return -EINVAL;
		}
		memcpy(&a->toks[a->n_toks++], &cfg->kv_tokens[i], sizeof(a->toks[0]));
	}
	if (cfg->kv_shm_group[0]) {
		struct group gr, *res = NULL;
		char buf[4096], *end;
		/* a number is a gid as it is (a container's image may not name the group) */
		errno = 0;
		unsigned long gid = strtoul(cfg->kv_shm_group, &end, 10);
		if (cfg->kv_shm_group[0] >= '0' && cfg->kv_shm_group[0] <= '9' && !*end && !errno &&
		    gid < (gid_t)-1) {
			a->has_gid = true;
			a->gid = (gid_t)gid;
			return 0;
		}
		if (getgrnam_r(cfg->kv_shm_group, &gr, buf, sizeof(buf), &res) != 0 || !res) {
			ol_err("kv: shm_group \"%s\": no such group (give a group name or a "
			       "numeric gid)",
			       cfg->kv_shm_group);
			return -EINVAL;
		}
		a->has_gid = true;
		a->gid = res->gr_gid;
	}
	return 0;
}

bool
ol_kva_on(const struct ol_kva *a)
{
	return a->n_toks > 0;
}

static bool
ns_allowed(const char *patterns, const char *ns)
{
	char pat[1024];
	const char *p = patterns;
	while (*p) {
		size_t l = strcspn(p, ",");
		if (l < sizeof(pat)) {
			memcpy(pat, p, l);
			pat[l] = '\0';
			if (l && fnmatch(pat, ns, 0) == 0)
				return true;
		}
		p += l + (p[l] == ',');
	}
	return false;
}

int
ol_kva_check(const struct ol_kva *a, const uint8_t nonce[OL_KVP_NONCE], const char *ns,
	     uint16_t ns_len, const uint8_t mac[OL_KVP_MAC])
{
	uint8_t msg[OL_KVP_AUTH_MSG], want[EVP_MAX_MD_SIZE];
	char nsz[OL_KVP_MAX_NS + 1];
	size_t ml = ol_kvp_auth_msg(msg, nonce, ns, ns_len);
	memcpy(nsz, ns, ns_len);
	nsz[ns_len] = '\0';
	int rc = -EKEYREJECTED;
	for (unsigned i = 0; i < a->n_toks; i++) {
		unsigned wl = 0;
		const struct ol_kva_token *t = &a->toks[i];
		if (!HMAC(EVP_sha256(), t->token, (int)strlen(t->token), msg, ml, want, &wl) ||
		    wl != OL_KVP_MAC || CRYPTO_memcmp(want, mac, OL_KVP_MAC) != 0)
			continue;
		if (strlen(nsz) == ns_len && ns_allowed(t->namespaces, nsz))
			return 0;
		rc = -EACCES;
	}
	return rc;
}

static bool
in_groups(pid_t pid, gid_t gid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		for (char *p = line + 7, *end; *p && *p != '\n'; p = end) {
			unsigned long g = strtoul(p, &end, 10);
			if (end == p)
				break;
			found |= g == gid;
		}
	}
	if (f)
		fclose(f);
	return found;
}

bool
ol_kva_peer_local(const struct ol_kva *a, int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr))
		return false;
	if (cr.uid == a->uid || cr.uid == 0)
		return true;
	return a->has_gid && (cr.gid == a->gid || in_groups(cr.pid, a->gid));
}

/* cluster/etcd_json.h - pure encode/decode of etcd v3 JSON gateway messages (no I/O).
 *
 * Encoders return a malloc'd NUL-terminated JSON text (caller frees) or NULL (out of memory,
 * or an argument that cannot be encoded). Decoders take (buf, len) from the network, never
 * trust it, and return 0 or -errno: -EPROTO for text that is not the expected message,
 * -ENOMEM; an error object from etcd ({"error", "code"} or a stream's {"error": {...}}) is
 * mapped to -errno by ol_etcd_json_error (see etcd.h for the codes). */
#ifndef OL_CLUSTER_ETCD_JSON_H
#define OL_CLUSTER_ETCD_JSON_H

#include "cluster/etcd.h"

char *ol_etcd_enc_range(const char *key, unsigned flags, int64_t rev, int64_t limit);
char *ol_etcd_enc_put(const char *key, const void *value, size_t value_len, int64_t lease);
char *ol_etcd_enc_delete(const char *key, unsigned flags);
char *ol_etcd_enc_txn(const struct ol_etcd_cmp *cmp, size_t n_cmp, const struct ol_etcd_op *success,
		      size_t n_success, const struct ol_etcd_op *failure, size_t n_failure);
/* {"TTL": n} for grant, {"ID": "n"} for keepalive, revoke and timetolive */
char *ol_etcd_enc_lease(const char *field, int64_t v);
char *ol_etcd_enc_watch(const char *key, unsigned flags, int64_t start_rev);

/* 0 when buf is not an error object; else the error mapped to -errno, *grpc_code (may be
 * NULL) set to etcd's code and msg (may be NULL) to its message. */
int ol_etcd_json_error(const char *buf, size_t len, int *grpc_code, char *msg, size_t msglen);
/* grpc status code -> -errno */
int ol_etcd_errno(int grpc_code, const char *message);

int ol_etcd_dec_range(const char *buf, size_t len, struct ol_etcd_range_result *out);
/* put and delete: header revision and (delete) the count deleted (either may be NULL) */
int ol_etcd_dec_write(const char *buf, size_t len, int64_t *revision, int64_t *deleted);
int ol_etcd_dec_txn(const char *buf, size_t len, struct ol_etcd_txn_result *out);
/* grant, keepalive (inside "result"), timetolive: ID and TTL (either may be NULL). A lease
 * that does not exist (keepalive without TTL, timetolive TTL -1) is -ENOENT. */
int ol_etcd_dec_lease(const char *buf, size_t len, int64_t *id, int64_t *ttl);

/* One message of a watch stream: the gateway writes one JSON object per line. */
struct ol_etcd_watch_msg {
	bool created, canceled;
	int64_t revision, compact_revision;
	struct ol_etcd_event *events;
	size_t n_events;
};
/* Parse the first complete line of buf. Returns bytes consumed (the line and its newline),
 * 0 when no complete line is there yet, or -errno (then msg holds nothing to free).
 * An empty line is consumed with n_events == 0. */
long ol_etcd_watch_parse(const char *buf, size_t len, struct ol_etcd_watch_msg *msg);
void ol_etcd_watch_msg_fini(struct ol_etcd_watch_msg *msg);

void ol_etcd_kv_fini(struct ol_etcd_kv *kv);

/* The end of the range of every key that starts with key (etcd's prefix rule: last byte
 * + 1, trailing 0xff dropped; "\0" = no end). Writes to end (len bytes). Returns its length. */
size_t ol_etcd_prefix_end(const char *key, size_t klen, char *end);

#endif

/* cluster/etcd_json.c - pure encode/decode of etcd v3 JSON gateway messages.
 * Keys and values travel base64-encoded, 64-bit numbers as JSON strings (accepted as numbers
 * too), absent fields mean zero / false (the gateway omits defaults). */
#include "cluster/etcd_json.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define MAX_B64 (64u << 20) /* a key or value larger than this is refused */

/* ---- base64 and numbers ---- */

static json_t *
b64_json(const void *data, size_t len)
{
	if (len > MAX_B64)
		return NULL;
	size_t cap = 4 * ((len + 2) / 3) + 1;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	int n = EVP_EncodeBlock((unsigned char *)s, data, (int)len);
	json_t *j = json_stringn(s, (size_t)n);
	free(s);
	return j;
}

/* base64 text -> malloc'd NUL-terminated bytes */
static int
b64_dec(const char *s, size_t slen, char **out, size_t *outlen)
{
	if (slen % 4 || slen > MAX_B64)
		return -EPROTO;
	char *b = malloc(slen / 4 * 3 + 1);
	if (!b)
		return -ENOMEM;
	int n = slen ? EVP_DecodeBlock((unsigned char *)b, (const unsigned char *)s, (int)slen) : 0;
	if (n < 0) {
		free(b);
		return -EPROTO;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes */
	for (size_t i = slen; i > 0 && s[i - 1] == '=' && n > 0; i--)
		n--;
	b[n] = 0;
	*out = b;
	*outlen = (size_t)n;
	return 0;
}

static json_t *
i64_json(int64_t v)
{
	char s[32];
	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

/* a field that is a number as a string or as a number; absent = 0 */
static int
get_i64(const json_t *o, const char *name, int64_t *out)
{
	const json_t *j = json_object_get(o, name);
	*out = 0;
	if (!j)
		return 0;
	if (json_is_integer(j)) {
		*out = json_integer_value(j);
		return 0;
	}
	if (!json_is_string(j))
		return -EPROTO;
	const char *s = json_string_value(j);
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return -EPROTO;
	*out = v;
	return 0;
}

static bool
get_bool(const json_t *o, const char *name)
{
	return json_is_true(json_object_get(o, name));
}

size_t
ol_etcd_prefix_end(const char *key, size_t klen, char *end)
{
	memcpy(end, key, klen);
	while (klen > 0) {
		unsigned char c = (unsigned char)end[klen - 1];
		if (c < 0xff) {
			end[klen - 1] = (char)(c + 1);
			return klen;
		}
		klen--;
	}
	end[0] = 0; /* every key: range_end "\0" */
	return 1;
}

/* key (and range_end for a prefix) into o */
static int
set_key(json_t *o, const char *name, const char *key, unsigned flags)
{
	size_t kl = strlen(key);
	if (json_object_set_new(o, name, b64_json(key, kl)))
		return -ENOMEM;
	if (!(flags & OL_ETCD_PREFIX))
		return 0;
	char *end = malloc(kl + 1);
	if (!end)
		return -ENOMEM;
	size_t el = ol_etcd_prefix_end(key, kl, end);
	int rc = json_object_set_new(o, "range_end", b64_json(end, el)) ? -ENOMEM : 0;
	free(end);
	return rc;
}

static char *
dump_free(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* ---- encoders ---- */

static json_t *
range_obj(const char *key, unsigned flags, int64_t rev, int64_t limit)
{
	json_t *o = json_object();
	if (!o || set_key(o, "key", key, flags))
		goto bad;
	if (rev && json_object_set_new(o, "revision", i64_json(rev)))
		goto bad;
	if (limit && json_object_set_new(o, "limit", i64_json(limit)))
		goto bad;
	return o;
bad:
	json_decref(o);
	return NULL;
}

static json_t *
put_obj(const char *key, const void *value, size_t value_len, int64_t lease)
{
	json_t *o = json_object();
	if (!o || set_key(o, "key", key, 0) ||
	    json_object_set_new(o, "value", b64_json(value, value_len)))
		goto bad;
	if (lease && json_object_set_new(o, "lease", i64_json(lease)))
		goto bad;
	return o;
bad:
	json_decref(o);
	return NULL;
}

static json_t *
delete_obj(const char *key, unsigned flags)
{
	json_t *o = json_object();
	if (!o || set_key(o, "key", key, flags)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

char *
ol_etcd_enc_range(const char *key, unsigned flags, int64_t rev, int64_t limit)
{
	return dump_free(range_obj(key, flags, rev, limit));
}

char *
ol_etcd_enc_put(const char *key, const void *value, size_t value_len, int64_t lease)
{
	return dump_free(put_obj(key, value, value_len, lease));
}

char *
ol_etcd_enc_delete(const char *key, unsigned flags)
{
	return dump_free(delete_obj(key, flags));
}

static json_t *
cmp_obj(const struct ol_etcd_cmp *c)
{
	static const char *const targets[] = {"CREATE", "MOD", "VERSION", "VALUE"};
	static const char *const fields[] = {"create_revision", "mod_revision", "version", NULL};
	static const char *const results[] = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
	if ((unsigned)c->target > OL_ETCD_CMP_VALUE || (unsigned)c->result > OL_ETCD_LESS)
		return NULL;
	json_t *o = json_object();
	if (!o || set_key(o, "key", c->key, 0) ||
	    json_object_set_new(o, "target", json_string(targets[c->target])) ||
	    json_object_set_new(o, "result", json_string(results[c->result])))
		goto bad;
	if (c->target == OL_ETCD_CMP_VALUE) {
		if (json_object_set_new(o, "value", b64_json(c->value, c->value_len)))
			goto bad;
	} else if (json_object_set_new(o, fields[c->target], i64_json(c->number))) {
		goto bad;
	}
	return o;
bad:
	json_decref(o);
	return NULL;
}

static json_t *
op_obj(const struct ol_etcd_op *op)
{
	json_t *inner = NULL;
	const char *name = NULL;
	switch (op->type) {
	case OL_ETCD_OP_RANGE:
		inner = range_obj(op->key, op->flags, 0, 0);
		name = "request_range";
		break;
	case OL_ETCD_OP_PUT:
		inner = put_obj(op->key, op->value, op->value_len, op->lease);
		name = "request_put";
		break;
	case OL_ETCD_OP_DELETE:
		inner = delete_obj(op->key, op->flags);
		name = "request_delete_range";
		break;
	}
	if (!inner)
		return NULL;
	json_t *o = json_object();
	if (!o || json_object_set_new(o, name, inner)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *
ops_array(const struct ol_etcd_op *ops, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		if (json_array_append_new(a, op_obj(&ops[i]))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

char *
ol_etcd_enc_txn(const struct ol_etcd_cmp *cmp, size_t n_cmp, const struct ol_etcd_op *success,
		size_t n_success, const struct ol_etcd_op *failure, size_t n_failure)
{
	json_t *o = json_object(), *c = json_array();
	if (!o || !c)
		goto bad;
	for (size_t i = 0; i < n_cmp; i++)
		if (json_array_append_new(c, cmp_obj(&cmp[i])))
			goto bad;
	if (json_object_set_new(o, "compare", c)) {
		c = NULL;
		goto bad;
	}
	c = NULL;
	if (json_object_set_new(o, "success", ops_array(success, n_success)) ||
	    json_object_set_new(o, "failure", ops_array(failure, n_failure)))
		goto bad;
	return dump_free(o);
bad:
	json_decref(c);
	json_decref(o);
	return NULL;
}

char *
ol_etcd_enc_lease(const char *field, int64_t v)
{
	json_t *o = json_object();
	if (!o || json_object_set_new(o, field, i64_json(v))) {
		json_decref(o);
		return NULL;
	}
	return dump_free(o);
}

char *
ol_etcd_enc_watch(const char *key, unsigned flags, int64_t start_rev)
{
	json_t *o = json_object(), *cr = json_object();
	if (!o || !cr || set_key(cr, "key", key, flags))
		goto bad;
	if (start_rev && json_object_set_new(cr, "start_revision", i64_json(start_rev)))
		goto bad;
	if (json_object_set_new(o, "create_request", cr)) {
		cr = NULL;
		goto bad;
	}
	return dump_free(o);
bad:
	json_decref(cr);
	json_decref(o);
	return NULL;
}

/* ---- decoders ---- */

int
ol_etcd_errno(int grpc_code, const char *message)
{
	switch (grpc_code) {
	case 0:
		return 0;
	case 3: /* InvalidArgument */
		return -EINVAL;
	case 4: /* DeadlineExceeded */
		return -ETIMEDOUT;
	case 5: /* NotFound: lease not found */
		return -ENOENT;
	case 7:	 /* PermissionDenied */
	case 16: /* Unauthenticated */
		return -EACCES;
	case 8: /* ResourceExhausted */
		return -ENOSPC;
	case 11: /* OutOfRange: compacted, future revision */
		if (message && strstr(message, "compacted"))
			return OL_ETCD_ECOMPACTED;
		return -ERANGE;
	case 14: /* Unavailable: no leader, leader changed, stopping */
		return -EAGAIN;
	default:
		return -EIO;
	}
}

static json_t *
load(const char *buf, size_t len)
{
	json_error_t e;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	if (j && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

static int
error_of(const json_t *j, int *grpc_code, char *msg, size_t msglen)
{
	const json_t *e = json_object_get(j, "error");
	if (!e)
		return 0;
	int64_t code = 0;
	const char *m = "";
	if (json_is_object(e)) { /* a stream's error: {"error": {"grpc_code", "message"}} */
		if (get_i64(e, "grpc_code", &code))
			return -EPROTO;
		m = json_string_value(json_object_get(e, "message"));
	} else {
		if (get_i64(j, "code", &code))
			return -EPROTO;
		m = json_string_value(json_object_get(j, "message"));
		if (!m)
			m = json_string_value(e);
	}
	if (!m)
		m = "";
	if (grpc_code)
		*grpc_code = (int)code;
	if (msg && msglen)
		snprintf(msg, msglen, "%s", m);
	int rc = ol_etcd_errno((int)code, m);
	return rc ? rc : -EIO;
}

int
ol_etcd_json_error(const char *buf, size_t len, int *grpc_code, char *msg, size_t msglen)
{
	json_t *j = load(buf, len);
	if (!j)
		return 0;
	int rc = error_of(j, grpc_code, msg, msglen);
	json_decref(j);
	return rc;
}

void
ol_etcd_kv_fini(struct ol_etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static int
b64_field(const json_t *o, const char *name, char **out, size_t *outlen)
{
	const json_t *j = json_object_get(o, name);
	if (!j)
		return b64_dec("", 0, out, outlen);
	if (!json_is_string(j))
		return -EPROTO;
	return b64_dec(json_string_value(j), json_string_length(j), out, outlen);
}

static int
dec_kv(const json_t *o, struct ol_etcd_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(o))
		return -EPROTO;
	int rc = b64_field(o, "key", &kv->key, &kv->key_len);
	if (!rc)
		rc = b64_field(o, "value", &kv->value, &kv->value_len);
	if (!rc)
		rc = get_i64(o, "create_revision", &kv->create_revision);
	if (!rc)
		rc = get_i64(o, "mod_revision", &kv->mod_revision);
	if (!rc)
		rc = get_i64(o, "version", &kv->version);
	if (!rc)
		rc = get_i64(o, "lease", &kv->lease);
	if (rc)
		ol_etcd_kv_fini(kv);
	return rc;
}

static int
header_rev(const json_t *o, int64_t *rev)
{
	const json_t *h = json_object_get(o, "header");
	*rev = 0;
	if (!h)
		return 0;
	return json_is_object(h) ? get_i64(h, "revision", rev) : -EPROTO;
}

void
ol_etcd_range_result_fini(struct ol_etcd_range_result *r)
{
	for (size_t i = 0; i < r->n_kvs; i++)
		ol_etcd_kv_fini(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

static int
range_of(const json_t *o, struct ol_etcd_range_result *out)
{
	memset(out, 0, sizeof(*out));
	const json_t *kvs = json_object_get(o, "kvs");
	int rc = header_rev(o, &out->revision);
	if (!rc)
		rc = get_i64(o, "count", &out->count);
	if (rc)
		return rc;
	out->more = get_bool(o, "more");
	if (!kvs)
		return 0;
	if (!json_is_array(kvs))
		return -EPROTO;
	size_t n = json_array_size(kvs);
	out->kvs = calloc(n ? n : 1, sizeof(*out->kvs));
	if (!out->kvs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		rc = dec_kv(json_array_get(kvs, i), &out->kvs[i]);
		if (rc) {
			ol_etcd_range_result_fini(out);
			return rc;
		}
		out->n_kvs++;
	}
	return 0;
}

int
ol_etcd_dec_range(const char *buf, size_t len, struct ol_etcd_range_result *out)
{
	memset(out, 0, sizeof(*out));
	json_t *j = load(buf, len);
	if (!j)
		return -EPROTO;
	int rc = error_of(j, NULL, NULL, 0);
	if (!rc)
		rc = range_of(j, out);
	json_decref(j);
	return rc;
}

int
ol_etcd_dec_write(const char *buf, size_t len, int64_t *revision, int64_t *deleted)
{
	json_t *j = load(buf, len);
	if (!j)
		return -EPROTO;
	int64_t rev = 0, del = 0;
	int rc = error_of(j, NULL, NULL, 0);
	if (!rc)
		rc = header_rev(j, &rev);
	if (!rc)
		rc = get_i64(j, "deleted", &del);
	if (!rc && revision)
		*revision = rev;
	if (!rc && deleted)
		*deleted = del;
	json_decref(j);
	return rc;
}

void
ol_etcd_txn_result_fini(struct ol_etcd_txn_result *r)
{
	for (size_t i = 0; i < r->n_ranges; i++)
		ol_etcd_range_result_fini(&r->ranges[i]);
	free(r->ranges);
	memset(r, 0, sizeof(*r));
}

static int
txn_of(const json_t *j, struct ol_etcd_txn_result *out)
{
	int rc = header_rev(j, &out->revision);
	if (rc)
		return rc;
	out->succeeded = get_bool(j, "succeeded");
	const json_t *resps = json_object_get(j, "responses");
	if (!resps)
		return 0;
	if (!json_is_array(resps))
		return -EPROTO;
	size_t n = json_array_size(resps);
	out->ranges = calloc(n ? n : 1, sizeof(*out->ranges));
	if (!out->ranges)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const json_t *r = json_array_get(resps, i);
		if (!json_is_object(r))
			return -EPROTO;
		const json_t *rr = json_object_get(r, "response_range");
		if (!rr)
			continue;
		if (!json_is_object(rr))
			return -EPROTO;
		rc = range_of(rr, &out->ranges[out->n_ranges]);
		if (rc)
			return rc;
		out->n_ranges++;
	}
	return 0;
}

int
ol_etcd_dec_txn(const char *buf, size_t len, struct ol_etcd_txn_result *out)
{
	memset(out, 0, sizeof(*out));
	json_t *j = load(buf, len);
	if (!j)
		return -EPROTO;
	int rc = error_of(j, NULL, NULL, 0);
	if (!rc)
		rc = txn_of(j, out);
	if (rc)
		ol_etcd_txn_result_fini(out);
	json_decref(j);
	return rc;
}

int
ol_etcd_dec_lease(const char *buf, size_t len, int64_t *id, int64_t *ttl)
{
	json_t *j = load(buf, len);
	if (!j)
		return -EPROTO;
	int64_t i = 0, t = 0;
	int rc = error_of(j, NULL, NULL, 0);
	const json_t *o = json_object_get(j, "result");
	if (!o)
		o = j;
	else if (!json_is_object(o))
		rc = rc ? rc : -EPROTO;
	if (!rc)
		rc = get_i64(o, "ID", &i);
	if (!rc)
		rc = get_i64(o, "TTL", &t);
	if (!rc && t <= 0 && json_object_get(o, "header")) /* keepalive/ttl of a lost lease */
		rc = -ENOENT;
	if (!rc && id)
		*id = i;
	if (!rc && ttl)
		*ttl = t;
	json_decref(j);
	return rc;
}

void
ol_etcd_watch_msg_fini(struct ol_etcd_watch_msg *msg)
{
	for (size_t i = 0; i < msg->n_events; i++)
		ol_etcd_kv_fini(&msg->events[i].kv);
	free(msg->events);
	memset(msg, 0, sizeof(*msg));
}

static int
watch_of(const json_t *r, struct ol_etcd_watch_msg *msg)
{
	int rc = header_rev(r, &msg->revision);
	if (!rc)
		rc = get_i64(r, "compact_revision", &msg->compact_revision);
	if (rc)
		return rc;
	msg->created = get_bool(r, "created");
	msg->canceled = get_bool(r, "canceled");
	const json_t *evs = json_object_get(r, "events");
	if (!evs)
		return 0;
	if (!json_is_array(evs))
		return -EPROTO;
	size_t n = json_array_size(evs);
	msg->events = calloc(n ? n : 1, sizeof(*msg->events));
	if (!msg->events)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(evs, i);
		if (!json_is_object(e))
			return -EPROTO;
		const char *t = json_string_value(json_object_get(e, "type"));
		struct ol_etcd_event *ev = &msg->events[msg->n_events];
		if (t && strcmp(t, "DELETE") == 0)
			ev->type = OL_ETCD_EV_DELETE;
		else if (!t || strcmp(t, "PUT") == 0)
			ev->type = OL_ETCD_EV_PUT;
		else
			return -EPROTO;
		rc = dec_kv(json_object_get(e, "kv"), &ev->kv);
		if (rc)
			return rc;
		msg->n_events++;
	}
	return 0;
}

long
ol_etcd_watch_parse(const char *buf, size_t len, struct ol_etcd_watch_msg *msg)
{
	memset(msg, 0, sizeof(*msg));
	const char *nl = memchr(buf, '\n', len);
	if (!nl)
		return 0;
	size_t ll = (size_t)(nl - buf);
	if (ll > 0x7fffffff)
		return -EMSGSIZE;
	size_t i = 0;
	while (i < ll && (buf[i] == ' ' || buf[i] == '\r' || buf[i] == '\t'))
		i++;
	if (i == ll)
		return (long)ll + 1;
	json_t *j = load(buf, ll);
	if (!j)
		return -EPROTO;
	int rc = error_of(j, NULL, NULL, 0);
	const json_t *r = json_object_get(j, "result");
	if (!rc && !json_is_object(r))
		rc = -EPROTO;
	if (!rc)
		rc = watch_of(r, msg);
	json_decref(j);
	if (rc) {
		ol_etcd_watch_msg_fini(msg);
		return rc;
	}
	return (long)ll + 1;
}

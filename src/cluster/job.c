/* cluster/job.c - long-running job records in etcd (<prefix>jobs/<name>), written only by the
 * leader of a set: see cluster.h, "job records". */
#include "cluster/internal.h"

#include "cluster/etcd.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
job_key(const struct ol_cluster *c, const char *name, char *key, size_t len)
{
	snprintf(key, len, "%sjobs/%s", c->cfg->cluster_prefix, name);
}

int
ol_cluster_job_get(struct ol_cluster *c, const char *name, char **value, size_t *len,
		   int64_t *mod_rev)
{
	char key[OL_CFG_STR + 80];
	struct ol_etcd_range_result r;
	int rc;

	*value = NULL;
	*len = 0;
	*mod_rev = 0;
	job_key(c, name, key, sizeof(key));
	rc = ol_etcd_range(c->etcd, key, 0, 0, 0, &r);
	if (rc)
		return rc;
	if (r.n_kvs) {
		*value = r.kvs[0].value; /* taken over (NUL-terminated) */
		*len = r.kvs[0].value_len;
		*mod_rev = r.kvs[0].mod_revision;
		r.kvs[0].value = NULL;
	} else {
		rc = -ENOENT;
	}
	ol_etcd_range_result_fini(&r);
	return rc;
}

int
ol_cluster_job_put(struct ol_cluster *c, const char *name, const char *value, unsigned pool,
		   unsigned set, uint64_t epoch, int64_t mod_rev, int64_t *new_rev)
{
	char key[OL_CFG_STR + 80];
	struct ol_cluster_set *s = ol_cluster_find_set(c, pool, set);
	struct ol_etcd_txn_result t = {0};
	int rc;

	if (!s)
		return -ESTALE;
	job_key(c, name, key, sizeof(key));
	/* the record is as this writer last saw it (absent: created 0), and this node's leader
	 * key is the one of epoch: a leader that was replaced writes nothing */
	struct ol_etcd_cmp cmp[2] = {{.key = key,
				      .target = mod_rev ? OL_ETCD_CMP_MOD : OL_ETCD_CMP_CREATE,
				      .result = OL_ETCD_EQUAL,
				      .number = mod_rev},
				     {.key = s->key,
				      .target = OL_ETCD_CMP_CREATE,
				      .result = OL_ETCD_EQUAL,
				      .number = (int64_t)epoch}};
	struct ol_etcd_op put = {
	    .type = OL_ETCD_OP_PUT, .key = key, .value = value, .value_len = strlen(value)};
	struct ol_etcd_op get = {.type = OL_ETCD_OP_RANGE, .key = s->key};
	rc = ol_etcd_txn(c->etcd, cmp, 2, &put, 1, &get, 1, &t);
	if (!rc && t.succeeded && new_rev)
		*new_rev = t.revision;
	if (!rc && !t.succeeded)
		rc = t.n_ranges == 1 && t.ranges[0].n_kvs == 1 &&
			     t.ranges[0].kvs[0].create_revision == (int64_t)epoch
			 ? -ECANCELED
			 : -ESTALE;
	ol_etcd_txn_result_fini(&t);
	return rc;
}

int
ol_cluster_job_swap(struct ol_cluster *c, const char *name, const char *value, int64_t mod_rev,
		    int64_t *new_rev)
{
	char key[OL_CFG_STR + 80];
	struct ol_etcd_txn_result t = {0};
	int rc;

	if (mod_rev <= 0)
		return -EINVAL;
	job_key(c, name, key, sizeof(key));
	struct ol_etcd_cmp cmp = {
	    .key = key, .target = OL_ETCD_CMP_MOD, .result = OL_ETCD_EQUAL, .number = mod_rev};
	struct ol_etcd_op put = {
	    .type = OL_ETCD_OP_PUT, .key = key, .value = value, .value_len = strlen(value)};
	rc = ol_etcd_txn(c->etcd, &cmp, 1, &put, 1, NULL, 0, &t);
	if (!rc && t.succeeded && new_rev)
		*new_rev = t.revision;
	if (!rc && !t.succeeded)
		rc = -ECANCELED;
	ol_etcd_txn_result_fini(&t);
	return rc;
}

int
ol_cluster_job_head_parse(const char *buf, size_t len, struct ol_cluster_job_head *out)
{
	json_error_t e;
	json_t *j = json_loadb(buf, len, 0, &e);
	json_t *id = json_object_get(j, "job"), *st = json_object_get(j, "state");
	json_t *node = json_object_get(j, "node"), *ep = json_object_get(j, "epoch");
	int rc = -EPROTO;

	memset(out, 0, sizeof(*out));
	if (!json_is_string(id) || !json_is_string(st) ||
	    json_string_length(id) >= sizeof(out->job) ||
	    json_string_length(st) >= sizeof(out->state) ||
	    (node && (!json_is_integer(node) || json_integer_value(node) < 0)) ||
	    (ep && (!json_is_integer(ep) || json_integer_value(ep) < 0)))
		goto out;
	snprintf(out->job, sizeof(out->job), "%s", json_string_value(id));
	snprintf(out->state, sizeof(out->state), "%s", json_string_value(st));
	out->node = node ? (unsigned)json_integer_value(node) : 0;
	out->epoch = ep ? (uint64_t)json_integer_value(ep) : 0;
	rc = 0;
out:
	json_decref(j);
	return rc;
}

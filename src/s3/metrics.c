/* s3/metrics.c - per-operation request counters and latency histograms (Prometheus). */
#include "s3/s3int.h"

#include <stdio.h>
#include <string.h>

#include "base/metrics.h"

static const char *const ops[] = {
    "ListBuckets",
    "CreateBucket",
    "HeadBucket",
    "DeleteBucket",
    "GetBucketLocation",
    "GetBucketVersioning",
    "GetAcl",
    "PutAcl",
    "GetBucketPolicy",
    "PutBucketPolicy",
    "DeleteBucketPolicy",
    "GetBucketPolicyStatus",
    "PutPublicAccessBlock",
    "GetPublicAccessBlock",
    "PutBucketOwnershipControls",
    "GetBucketOwnershipControls",
    "PutBucketCors",
    "GetBucketCors",
    "DeleteBucketSetting",
    "PreflightCors",
    "PostObject",
    "ListObjects",
    "ListObjectsV2",
    "ListObjectVersions",
    "PutObject",
    "CopyObject",
    "GetObject",
    "HeadObject",
    "DeleteObject",
    "DeleteObjects",
    "CreateMultipartUpload",
    "UploadPart",
    "UploadPartCopy",
    "CompleteMultipartUpload",
    "AbortMultipartUpload",
    "ListParts",
    "ListMultipartUploads",
    "Other",
};
#define N_OPS (sizeof(ops) / sizeof(ops[0]))

struct op_stats {
	uint64_t requests, errors;
	struct ol_hist lat;
};
static struct op_stats stats[N_OPS];

static size_t
op_index(const char *op)
{
	for (size_t i = 0; op && i < N_OPS - 1; i++)
		if (strcmp(ops[i], op) == 0)
			return i;
	return N_OPS - 1;
}

/* Which operation a request is, most specific first: method, where (B bucket, K key, S
 * service), the query parameter that picks it (NULL = any). */
static const struct op_rule {
	const char *method;
	char where;
	const char *param;
	const char *op;
} op_rules[] = {
    {"GET", 'S', NULL, "ListBuckets"},
    {"GET", 'B', "location", "GetBucketLocation"},
    {"GET", 'B', "versioning", "GetBucketVersioning"},
    {"GET", 'B', "acl", "GetAcl"},
    {"GET", 'B', "policyStatus", "GetBucketPolicyStatus"},
    {"GET", 'B', "policy", "GetBucketPolicy"},
    {"GET", 'B', "publicAccessBlock", "GetPublicAccessBlock"},
    {"GET", 'B', "ownershipControls", "GetBucketOwnershipControls"},
    {"GET", 'B', "cors", "GetBucketCors"},
    {"GET", 'B', "uploads", "ListMultipartUploads"},
    {"GET", 'B', "versions", "ListObjectVersions"},
    {"GET", 'B', "list-type", "ListObjectsV2"}, /* list-type=1 is checked below */
    {"GET", 'B', NULL, "ListObjects"},
    {"HEAD", 'B', NULL, "HeadBucket"},
    {"PUT", 'B', "acl", "PutAcl"},
    {"PUT", 'B', "policy", "PutBucketPolicy"},
    {"PUT", 'B', "publicAccessBlock", "PutPublicAccessBlock"},
    {"PUT", 'B', "ownershipControls", "PutBucketOwnershipControls"},
    {"PUT", 'B', "cors", "PutBucketCors"},
    {"PUT", 'B', NULL, "CreateBucket"},
    {"DELETE", 'B', "policy", "DeleteBucketPolicy"},
    {"DELETE", 'B', "publicAccessBlock", "DeleteBucketSetting"},
    {"DELETE", 'B', "ownershipControls", "DeleteBucketSetting"},
    {"DELETE", 'B', "cors", "DeleteBucketSetting"},
    {"DELETE", 'B', NULL, "DeleteBucket"},
    {"POST", 'B', "delete", "DeleteObjects"},
    {"POST", 'B', NULL, "PostObject"},
    {"GET", 'K', "acl", "GetAcl"},
    {"GET", 'K', "uploadId", "ListParts"},
    {"GET", 'K', NULL, "GetObject"},
    {"HEAD", 'K', NULL, "HeadObject"},
    {"PUT", 'K', "acl", "PutAcl"},
    {"PUT", 'K', "uploadId", "UploadPart"}, /* UploadPartCopy with a copy source */
    {"PUT", 'K', NULL, "PutObject"},	    /* CopyObject with a copy source */
    {"POST", 'K', "uploads", "CreateMultipartUpload"},
    {"POST", 'K', "uploadId", "CompleteMultipartUpload"},
    {"DELETE", 'K', "uploadId", "AbortMultipartUpload"},
    {"DELETE", 'K', NULL, "DeleteObject"},
    {"OPTIONS", 'B', NULL, "PreflightCors"},
    {"OPTIONS", 'K', NULL, "PreflightCors"},
};

const char *
s3_metrics_op(const char *method, const char *query, bool bucket, bool key, bool copy)
{
	char where = key ? 'K' : bucket ? 'B' : 'S';
	char lt[8];
	for (size_t i = 0; i < sizeof(op_rules) / sizeof(op_rules[0]); i++) {
		const struct op_rule *o = &op_rules[i];
		if (o->where != where || strcmp(o->method, method) ||
		    (o->param && !ol_s3_query_has(query, o->param)))
			continue;
		if (strcmp(o->op, "ListObjectsV2") == 0 &&
		    (ol_s3_query_get(query, "list-type", lt, sizeof(lt)) < 0 || strcmp(lt, "2")))
			return "ListObjects";
		if (copy && strcmp(o->op, "UploadPart") == 0)
			return "UploadPartCopy";
		if (copy && strcmp(o->op, "PutObject") == 0)
			return "CopyObject";
		return o->op;
	}
	return "Other";
}

void
s3_metrics_record(const char *op, int status, uint64_t us)
{
	struct op_stats *s = &stats[op_index(op)];
	ol_counter_add(&s->requests, 1);
	if (status >= 400)
		ol_counter_add(&s->errors, 1);
	ol_hist_observe(&s->lat, us);
}

void
s3_metrics_render(struct ol_strbuf *out, void *arg)
{
	struct ol_s3_server *srv = arg;
	struct ol_http_stats hs = {0};
	const struct ol_http_server *http = atomic_load(&srv->http);
	if (http)
		ol_http_server_stats(http, &hs);
	ol_strbuf_printf(
	    out,
	    "# HELP openlake_http_connections Open connections on the S3 port.\n"
	    "# TYPE openlake_http_connections gauge\nopenlake_http_connections %lu\n"
	    "# HELP openlake_http_connections_total Connections accepted on the S3 port.\n"
	    "# TYPE openlake_http_connections_total counter\n"
	    "openlake_http_connections_total %lu\n"
	    "# HELP openlake_http_connections_rejected_total Connections refused over a limit.\n"
	    "# TYPE openlake_http_connections_rejected_total counter\n"
	    "openlake_http_connections_rejected_total %lu\n"
	    "# HELP openlake_http_bad_requests_total Requests HTTP answered with an error.\n"
	    "# TYPE openlake_http_bad_requests_total counter\n"
	    "openlake_http_bad_requests_total %lu\n"
	    "# HELP openlake_http_timeouts_total Idle, header or body timeouts on the S3 port.\n"
	    "# TYPE openlake_http_timeouts_total counter\nopenlake_http_timeouts_total %lu\n"
	    "# HELP openlake_http_bytes_total Bytes on the S3 port, by direction.\n"
	    "# TYPE openlake_http_bytes_total counter\n"
	    "openlake_http_bytes_total{dir=\"in\"} %lu\n"
	    "openlake_http_bytes_total{dir=\"out\"} %lu\n",
	    (unsigned long)hs.conns_open, (unsigned long)hs.conns_total,
	    (unsigned long)hs.conns_rejected, (unsigned long)hs.bad_requests,
	    (unsigned long)hs.timeouts, (unsigned long)hs.bytes_in, (unsigned long)hs.bytes_out);
	ol_strbuf_printf(
	    out,
	    "# HELP openlake_http_refused_total S3 connections or requests refused over a limit.\n"
	    "# TYPE openlake_http_refused_total counter\n"
	    "openlake_http_refused_total{limit=\"conns\"} %lu\n"
	    "openlake_http_refused_total{limit=\"conns_per_addr\"} %lu\n"
	    "openlake_http_refused_total{limit=\"inflight\"} %lu\n"
	    "openlake_http_refused_total{limit=\"head_memory\"} %lu\n"
	    "# HELP openlake_http_inflight S3 requests being served now.\n"
	    "# TYPE openlake_http_inflight gauge\nopenlake_http_inflight %lu\n"
	    "# HELP openlake_http_tls_handshake_failures_total Failed TLS handshakes.\n"
	    "# TYPE openlake_http_tls_handshake_failures_total counter\n"
	    "openlake_http_tls_handshake_failures_total %lu\n"
	    "# HELP openlake_io_buffer_cache_bytes Idle large PUT/GET buffers kept for reuse.\n"
	    "# TYPE openlake_io_buffer_cache_bytes gauge\nopenlake_io_buffer_cache_bytes %lu\n",
	    (unsigned long)(hs.conns_rejected - hs.rejected_per_addr),
	    (unsigned long)hs.rejected_per_addr, (unsigned long)hs.inflight_rejected,
	    (unsigned long)hs.head_mem_rejected, (unsigned long)hs.inflight,
	    (unsigned long)hs.tls_handshake_failures, (unsigned long)ol_store_buf_cached());
	struct ol_md5mb_stats ms;
	ol_md5mb_stats(&ms);
	ol_strbuf_printf(
	    out,
	    "# HELP openlake_etag_md5_passes_total Passes of the ETag's MD5 over its vector "
	    "lanes.\n"
	    "# TYPE openlake_etag_md5_passes_total counter\nopenlake_etag_md5_passes_total %lu\n"
	    "# HELP openlake_etag_md5_lanes_total Request bodies hashed in those passes, summed "
	    "(lanes / passes: how many shared a pass, at most 16).\n"
	    "# TYPE openlake_etag_md5_lanes_total counter\nopenlake_etag_md5_lanes_total %lu\n"
	    "# HELP openlake_etag_md5_info The instruction set the MD5 lanes run on.\n"
	    "# TYPE openlake_etag_md5_info gauge\nopenlake_etag_md5_info{isa=\"%s\"} 1\n",
	    (unsigned long)ms.runs, (unsigned long)ms.lanes, ol_md5mb_isa());
	ol_strbuf_printf(out, "# HELP openlake_s3_requests_total S3 requests by operation.\n"
			      "# TYPE openlake_s3_requests_total counter\n");
	for (size_t i = 0; i < N_OPS; i++)
		if (ol_counter_get(&stats[i].requests))
			ol_strbuf_printf(out, "openlake_s3_requests_total{op=\"%s\"} %lu\n", ops[i],
					 (unsigned long)ol_counter_get(&stats[i].requests));
	ol_strbuf_printf(out, "# HELP openlake_s3_errors_total S3 errors by operation.\n"
			      "# TYPE openlake_s3_errors_total counter\n");
	for (size_t i = 0; i < N_OPS; i++)
		if (ol_counter_get(&stats[i].requests))
			ol_strbuf_printf(out, "openlake_s3_errors_total{op=\"%s\"} %lu\n", ops[i],
					 (unsigned long)ol_counter_get(&stats[i].errors));
	ol_strbuf_printf(out,
			 "# HELP openlake_s3_request_duration_seconds S3 latency by operation.\n"
			 "# TYPE openlake_s3_request_duration_seconds histogram\n");
	for (size_t i = 0; i < N_OPS; i++) {
		char label[64];
		if (!ol_counter_get(&stats[i].requests))
			continue;
		snprintf(label, sizeof(label), "op=\"%s\"", ops[i]);
		ol_hist_render(out, "openlake_s3_request_duration_seconds", label, &stats[i].lat);
	}
}

#include "admin.h"

#include "base/log.h"
#include "base/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <unistd.h>

static const struct ol_config *admin_cfg;
static uint64_t admin_start_us;

extern const char ol_console_html[]; /* console.c */

void
ol_admin_init(const struct ol_config *cfg)
{
	admin_cfg = cfg;
	admin_start_us = ol_now_us();
}

static void
json_str(struct ol_strbuf *b, const char *s)
{
	ol_strbuf_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			ol_strbuf_printf(b, "\\%c", c);
		else if (c < 0x20)
			ol_strbuf_printf(b, "\\u%04x", c);
		else
			ol_strbuf_printf(b, "%c", c);
	}
	ol_strbuf_printf(b, "\"");
}

static void
status_drives(struct ol_strbuf *b, const struct ol_config *c)
{
	ol_strbuf_printf(b, "\"drives\":[");
	for (unsigned i = 0; i < c->n_data_dirs; i++) {
		struct statvfs vs;
		int ok = statvfs(c->data_dirs[i], &vs) == 0;
		int writable = ok && access(c->data_dirs[i], W_OK) == 0;
		unsigned long long total = ok ? (unsigned long long)vs.f_blocks * vs.f_frsize : 0;
		unsigned long long avail = ok ? (unsigned long long)vs.f_bavail * vs.f_frsize : 0;
		unsigned long long fr = ok ? (unsigned long long)vs.f_bfree * vs.f_frsize : 0;
		ol_strbuf_printf(b, "%s{\"index\":%u,\"path\":", i ? "," : "", i);
		json_str(b, c->data_dirs[i]);
		ol_strbuf_printf(b,
				 ",\"online\":%s,\"writable\":%s,\"total_bytes\":%llu,"
				 "\"used_bytes\":%llu,\"free_bytes\":%llu}",
				 ok ? "true" : "false", writable ? "true" : "false", total,
				 total - fr, avail);
	}
	ol_strbuf_printf(b, "]");
}

char *
ol_admin_status_json(void)
{
	struct ol_strbuf b = {0};
	const struct ol_config *c = admin_cfg;
	char host[256];
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = 0;
	ol_strbuf_printf(&b, "{\"version\":\"%s\",\"host\":", OL_VERSION);
	json_str(&b, host);
	ol_strbuf_printf(&b, ",\"uptime_seconds\":%.3f",
			 (double)(ol_now_us() - admin_start_us) / 1e6);
	if (c) {
		ol_strbuf_printf(&b, ",\"self_id\":%u,\"mode\":", c->self_id);
		json_str(&b, c->mode);
		ol_strbuf_printf(&b, ",\"s3_addr\":");
		json_str(&b, c->s3_addr);
		ol_strbuf_printf(&b, ",\"kv_addr\":");
		json_str(&b, ol_config_kv_listen(c));
		ol_strbuf_printf(&b, ",\"region\":");
		json_str(&b, c->region);
		ol_strbuf_printf(&b,
				 ",\"erasure\":{\"set_drive_count\":%u,\"data\":%u,\"parity\":%u},"
				 "\"nodes\":%u,",
				 c->set_drive_count, c->set_drive_count - c->default_parity_count,
				 c->default_parity_count, c->n_nodes);
		status_drives(&b, c);
	}
	ol_strbuf_printf(&b, "}\n");
	return b.p;
}

static int
is_signed(const struct ol_http_req *r)
{
	return ol_http_header(r, "authorization") || strstr(r->query, "X-Amz-Credential=") ||
	       strstr(r->query, "X-Amz-Signature=");
}

static void
send_text(struct ol_http_req *r, const char *type, const char *body, size_t len)
{
	struct ol_http_header h[] = {{"Content-Type", type}, {"Cache-Control", "no-store"}};
	if (ol_http_respond(r, 200, h, 2, (int64_t)len) == 0)
		ol_http_write(r, body, len);
	ol_http_finish(r);
}

int
ol_admin_handle(struct ol_http_req *r)
{
	int get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
	if (!get || is_signed(r))
		return 0;
	const char *p = r->path;
	if (strcmp(p, "/metrics") == 0 || strcmp(p, "/openlake/admin/v1/metrics") == 0) {
		struct ol_strbuf b = {0};
		ol_metrics_render(&b);
		send_text(r, "text/plain; version=0.0.4; charset=utf-8", b.p ? b.p : "", b.len);
		ol_strbuf_free(&b);
		return 1;
	}
	if (strcmp(p, "/openlake/admin/v1/status") == 0) {
		char *j = ol_admin_status_json();
		send_text(r, "application/json", j, strlen(j));
		free(j);
		return 1;
	}
	if (strcmp(p, "/openlake/health") == 0) {
		send_text(r, "text/plain", "ok\n", 3);
		return 1;
	}
	if (strcmp(p, "/openlake/console") == 0 || strcmp(p, "/openlake/console/") == 0) {
		send_text(r, "text/html; charset=utf-8", ol_console_html, strlen(ol_console_html));
		return 1;
	}
	const char *accept = ol_http_header(r, "accept");
	if (strcmp(p, "/") == 0 && accept && strstr(accept, "text/html")) {
		struct ol_http_header h[] = {{"Location", "/openlake/console"}};
		ol_http_respond(r, 302, h, 1, 0);
		ol_http_finish(r);
		return 1;
	}
	return 0;
}

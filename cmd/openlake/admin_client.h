/* cmd/openlake/admin_client.h - the CLI's calls to a daemon's admin plane (status, heal):
 * where the keys come from, one signed HTTP/1.1 request per call, and what a refusal means.
 * Used by node_cmd.c (node info, disk info, cluster status) and heal_cmd.c. */
#ifndef OL_CMD_OPENLAKE_ADMIN_CLIENT_H
#define OL_CMD_OPENLAKE_ADMIN_CLIENT_H

#include "base/config.h"

#include <stddef.h>

struct ol_cli_admin {
	char host[256], port[16]; /* the daemon's S3 address (the admin plane shares it) */
	/* HTTPS (a daemon with [s3_tls]): the daemon's certificate must chain to (or be) one in
	 * ca_file ("" = the system's CAs) and name host; cert/key ("" = none) shown when the
	 * daemon asks for a client certificate */
	bool tls;
	char ca_file[OL_CFG_STR], cert[OL_CFG_STR], key[OL_CFG_STR];
	char access_key[OL_CFG_STR], secret_key[OL_CFG_STR], region[64];
	char key_source[OL_CFG_STR + 32]; /* where the keys came from, for messages */
	int wait_ms; /* how long a call waits for each read or write of its answer (0 = 10 s) */
};

/* Pick the keys and region into a: the flags (ak/sk/region, NULL when not given); else
 * AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (and AWS_REGION/AWS_DEFAULT_REGION); else the first
 * admin [[credentials]] entry (and the region) of cfg (NULL without --config; cfg_path names it
 * in messages); else openlakeadmin/openlakeadmin, us-east-1. Returns 0, or -EINVAL when only
 * one of --access-key/--secret-key was given (a message naming cmd is printed). */
int ol_cli_admin_keys(struct ol_cli_admin *a, const char *cmd, const char *ak, const char *sk,
		      const char *region, const struct ol_config *cfg, const char *cfg_path);

/* url: http://HOST:PORT, https://HOST:PORT (a->tls) or HOST:PORT ("[v6]:PORT"; a path after
 * it ignored; a wildcard host, 0.0.0.0 or ::, becomes loopback) into a->host, a->port, a->tls.
 * 0, or -EINVAL (nothing printed). */
int ol_cli_admin_endpoint(struct ol_cli_admin *a, const char *url);

/* The TLS settings that reach the daemon of cfg (NULL: none) into a: its certificate is
 * checked against $AWS_CA_BUNDLE when set, else cfg's own [s3_tls] cert_path (a certificate
 * in it trusted on its own), else the system's CAs; with [s3_tls] client_ca the CLI shows
 * cfg's certificate and key (readable where the CLI runs as the daemon's user or root).
 * Returns whether cfg's S3 port speaks only HTTPS ([s3_tls]); a->tls is the caller's to set
 * (an --endpoint's scheme says it; the admin listener, console_addr, is plain HTTP). */
bool ol_cli_admin_tls(struct ol_cli_admin *a, const struct ol_config *cfg);

/* "https" or "http", for messages */
const char *ol_cli_admin_scheme(const struct ol_cli_admin *a);

/* Connect to host:port within timeout_ms. A blocking socket, or -errno. */
int ol_cli_tcp_connect(const char *host, const char *port, int timeout_ms);

/* One SigV4-signed request (no body, Connection: close) to path?query (query canonical: "" or
 * "name=value&..." sorted, encoded), over TLS with a->tls. Returns the HTTP status with the
 * reply body in *body (malloc'd, NUL-terminated, NULL when none; the caller frees), or -errno
 * when the daemon cannot be reached or the reply is not HTTP (-EPROTO: also a failed TLS
 * handshake) or over cap bytes (-EMSGSIZE); -EKEYREJECTED: its TLS certificate did not
 * verify. */
int ol_cli_admin_call(struct ol_cli_admin *a, const char *method, const char *path,
		      const char *query, size_t cap, char **body);

/* As ol_cli_admin_call, sending send_len bytes of send_body (JSON) signed with their SHA-256
 * (x-amz-content-sha256), so the daemon can check them. */
int ol_cli_admin_call_body(struct ol_cli_admin *a, const char *method, const char *path,
			   const char *query, const char *send_body, size_t send_len, size_t cap,
			   char **body);

/* Print to stderr why the daemon refused (status 400/403 with its XML error in body), naming
 * the key used, where it came from, and how to fix it. cmd: "heal", "node info"... */
void ol_cli_admin_refused(const struct ol_cli_admin *a, const char *cmd, int status,
			  const char *body);

/* Usage lines for the key flags (shared by the commands' --help). */
#define OL_CLI_ADMIN_KEY_HELP                                                                      \
	"  --access-key KEY  admin access key (default: $AWS_ACCESS_KEY_ID, else the first\n"      \
	"                    admin [[credentials]] of --config, else openlakeadmin)\n"             \
	"  --secret-key KEY  its secret (default: $AWS_SECRET_ACCESS_KEY, else as above)\n"        \
	"  --region NAME     SigV4 region (default: $AWS_REGION or $AWS_DEFAULT_REGION, else\n"    \
	"                    the config's region, else us-east-1)\n"

#endif

/* Fuzz target: the TOML reader and the config schema over arbitrary bytes (a config file, or a
 * --KEY VALUE override), then validation and the size/address helpers on the same text. */
#include "fuzz_scratch.h" /* libFuzzer writes to a scratch corpus, not ours */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ol_config c; /* large: keep it off the stack */
	char err[512];
	ol_config_default(&c);
	if (ol_config_parse(&c, "fuzz.toml", (const char *)data, size, err, sizeof(err)) == 0)
		(void)ol_config_validate(&c, err, sizeof(err));

	/* the first line as "KEY VALUE" and as a size / address */
	size_t n = 0;
	while (n < size && n < 4096 && data[n] != '\n')
		n++;
	char *line = malloc(n + 1);
	if (!line)
		return 0;
	memcpy(line, data, n);
	line[n] = '\0';
	uint64_t v;
	(void)ol_parse_size(line, &v);
	char host[256];
	unsigned port;
	(void)ol_config_split_addr(line, host, sizeof(host), &port);
	char *sp = strchr(line, ' ');
	if (sp) {
		*sp = '\0';
		ol_config_default(&c);
		(void)ol_config_set(&c, line, sp + 1, err, sizeof(err));
	}
	free(line);
	return 0;
}

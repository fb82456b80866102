/* base/toml.h - a pure TOML-subset tokenizer: (buf, len) -> callbacks. No I/O, no allocation
 * beyond a bounded scratch area on the stack.
 *
 * Supported: comments, blank lines, key = value, [a.b] tables, [[a]] arrays of tables,
 * "basic" strings with escapes (\" \\ \n \t \r \uXXXX), 'literal' strings, integers, floats,
 * booleans, arrays (may span lines, trailing comma) of strings or scalars, arrays of inline
 * tables (`nodes = [{ id = 0, rpc_addr = "a:1" }]`, reported as [[nodes]] entries).
 * Not supported (clean error): multi-line strings, dates, nested arrays, dotted keys. */
#ifndef OL_BASE_TOML_H
#define OL_BASE_TOML_H

#include <stddef.h>

#define OL_TOML_MAX_ITEMS 64
#define OL_TOML_MAX_LEN	  512

enum ol_toml_kind {
	OL_TOML_STRING,	      /* items[0] */
	OL_TOML_SCALAR,	      /* items[0]: the raw text of an integer, float or boolean */
	OL_TOML_ARRAY_STRING, /* items[0..n_items) */
	OL_TOML_ARRAY_OTHER,  /* items[0..n_items): raw scalars */
};

struct ol_toml_value {
	enum ol_toml_kind kind;
	size_t n_items;
	const char *items[OL_TOML_MAX_ITEMS];
};

struct ol_toml_cbs {
	/* a [table] or [[table]] header; return 0 or -errno to stop */
	int (*on_table)(void *arg, const char *table, int is_array, unsigned line);
	/* key = value inside table ("" for the root); the value lives until the callback returns */
	int (*on_value)(void *arg, const char *table, const char *key,
			const struct ol_toml_value *v, unsigned line);
	void *arg;
};

/* Returns 0, a callback's error, or -EBADMSG with a message in err and the line in *line. */
int ol_toml_parse(const char *buf, size_t len, const struct ol_toml_cbs *cbs, char *err,
		  size_t errlen, unsigned *line);

#endif

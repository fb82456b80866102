#!/bin/sh
# src/codec/cli_test.sh CLI DATA_DIR - `openlake codec` on real files (TAP). CLI is the
# `openlake` binary or the stand-alone `openlake-codec` (same source, no "codec" word).
cli=$1
oc() {
	if [ "$(basename "$cli")" = openlake ]; then "$cli" codec "$@"; else "$cli" "$@"; fi
}
data=$2/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
t() { # t DESCRIPTION COMMAND...
	desc=$1
	shift
	n=$((n + 1))
	if "$@" >/dev/null 2>&1; then echo "ok $n - $desc"; else echo "not ok $n - $desc"; fail=1; fi
}
if [ -f "$data/seq07.v.bf16" ]; then
	cp "$data/seq07.v.bf16" "$tmp/in.bf16"
else
	echo "# real KV dump absent: random bytes instead"
	head -c 200001 /dev/urandom >"$tmp/in.bf16"
fi
t "compress" oc compress "$tmp/in.bf16" "$tmp/c.exans"
t "compressed is smaller than raw + 100" sh -c "[ \$(wc -c <'$tmp/c.exans') -lt \$((\$(wc -c <'$tmp/in.bf16') + 100)) ]"
t "decompress" oc decompress "$tmp/c.exans" "$tmp/out.bf16"
t "round trip is identical" cmp "$tmp/in.bf16" "$tmp/out.bf16"
t "compress --block 4096" oc compress "$tmp/in.bf16" "$tmp/c4.exans" --block 4096
t "decompress small blocks" oc decompress "$tmp/c4.exans" "$tmp/out4.bf16"
t "round trip (4 KiB blocks)" cmp "$tmp/in.bf16" "$tmp/out4.bf16"
t "compress --rows 64" oc compress "$tmp/in.bf16" "$tmp/cr.exans" --rows 64
t "decompress rows mode" oc decompress "$tmp/cr.exans" "$tmp/outr.bf16"
t "round trip (rows mode)" cmp "$tmp/in.bf16" "$tmp/outr.bf16"
odd_rows() { oc compress "$tmp/in.bf16" "$tmp/x" --rows 63; [ $? -eq 2 ]; }
t "odd row size is a usage error" odd_rows
# flip one byte in the middle: must be an error, never different data
size=$(wc -c <"$tmp/c.exans")
cp "$tmp/c.exans" "$tmp/bad.exans"
printf '\377' | dd of="$tmp/bad.exans" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
refused() { ! oc decompress "$tmp/bad.exans" "$tmp/bad.out"; }
t "corrupt input is refused" refused
t "stats" oc stats "$tmp/in.bf16"
t "stats --block 32768" oc stats "$tmp/in.bf16" --block 32768
usage_err() { oc stats "$tmp/in.bf16" --block 3000; [ $? -eq 2 ]; }
t "bad block size is a usage error" usage_err
missing() { ! oc compress "$tmp/nope" "$tmp/x"; }
t "missing input is an error" missing
echo "1..$n"
exit $fail

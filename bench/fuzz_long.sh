#!/usr/bin/env bash
# Long fuzz run: every libFuzzer target for SECONDS each, one process at a time, on a COPY of
# its seed corpus (tests/fuzz/corpus/<target> is never written), with new inputs, crash/leak/
# timeout artifacts and logs in a temp dir. Prints one line per target: executions, coverage
# (cov: edges and ft: features from libFuzzer's last stats line), corpus size before -> after,
# crashes; then, per crash, the input in base64 and the top of its stack.
#
#   CC=clang meson setup build-fuzz -Dfuzz=true -Db_lundef=false && ninja -C build-fuzz
#   nice -n 10 bench/fuzz_long.sh [-t SECONDS] [-b BUILD_DIR] [-o WORK_DIR] [TARGET...]
#
# Defaults: 120 s per target, build-fuzz, a fresh mktemp dir (kept, path printed), all targets
# that have a corpus dir. Exit 0: no crash; 1: a target crashed (or did not run); 2: usage.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=120
build=build-fuzz
work=""
usage() { sed -n '2,13p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	-t) secs=${2:?}; shift 2 ;;
	-b) build=${2:?}; shift 2 ;;
	-o) work=${2:?}; shift 2 ;;
	-h | --help) usage ;;
	-*) usage ;;
	*) break ;;
	esac
done
case "$secs" in '' | *[!0-9]*) usage ;; esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for d in tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi
[ -n "$work" ] || work=$(mktemp -d /tmp/openlake-fuzz.XXXXXX)
mkdir -p "$work"

# The libFuzzer binary of a target: meson names it fuzz_<t>_libfuzzer or fuzz_<t> (the plain
# corpus runner is fuzz_corpus_<t>, or fuzz_<t> where the libFuzzer one has the suffix).
find_bin() {
	local t=$1 f
	for name in "fuzz_${t}_libfuzzer" "fuzz_${t}"; do
		while IFS= read -r f; do
			if nm "$f" 2>/dev/null | grep LLVMFuzzerRunDriver >/dev/null; then
				echo "$f"
				return 0
			fi
		done < <(find "$build" -type f -executable -name "$name" 2>/dev/null)
	done
	return 1
}

count() { find "$1" -maxdepth 1 -type f | wc -l; }

echo "# fuzz_long: ${secs}s per target, build $build, work dir $work, $(date -u +%FT%TZ)"
printf '| target | seconds | executions | exec/s | cov | ft | corpus in -> out | crashes |\n'
printf '|---|---|---|---|---|---|---|---|\n'
status=0
crashed=()
for t in "${targets[@]}"; do
	if ! bin=$(find_bin "$t"); then
		printf '| %s | - | not built (no libFuzzer binary in %s) | | | | | |\n' "$t" "$build"
		status=1
		continue
	fi
	dir="$work/$t"
	rm -rf "$dir"
	mkdir -p "$dir/corpus" "$dir/artifacts"
	cp -r "tests/fuzz/corpus/$t/." "$dir/corpus/"
	n_in=$(count "$dir/corpus")
	t0=$(date +%s)
	# The corpus dir given first is the one libFuzzer writes new inputs to: the copy.
	set +e
	"$bin" "$dir/corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1
	rc=$?
	set -e
	el=$(($(date +%s) - t0))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
	[ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$dir/log" | tail -1)
	[ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$dir/log" | tail -1 | tr -d '#')
	execs=${execs:-0}
	last=$(grep ' cov: ' "$dir/log" | tail -1 || true)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	n_out=$(count "$dir/corpus")
	ncrash=$(count "$dir/artifacts")
	if [ "$rc" -ne 0 ] && [ "$ncrash" -eq 0 ]; then
		ncrash="rc=$rc"
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s -> %s | %s |\n' "$t" "$el" "$execs" \
		"$((execs / (el > 0 ? el : 1)))" "${cov:--}" "${ft:--}" "$n_in" "$n_out" "$ncrash"
	if [ "$ncrash" != 0 ]; then
		status=1
		crashed+=("$t")
	fi
done

for t in "${crashed[@]+"${crashed[@]}"}"; do
	echo
	echo "## $t crashed: log $work/$t/log"
	for a in "$work/$t"/artifacts/*; do
		[ -f "$a" ] || continue
		echo "input $(basename "$a") (base64):"
		base64 -w 76 "$a"
	done
	grep -m1 -A25 -E 'ERROR: (AddressSanitizer|UndefinedBehavior|LeakSanitizer|libFuzzer)|runtime error|deadly signal' \
		"$work/$t/log" || tail -30 "$work/$t/log"
done
echo "# work dir (copied corpora with new inputs, logs, artifacts): $work"
exit $status

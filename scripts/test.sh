#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, builds, runs
# the C unit tests and fuzz corpora, the integration tests with real clients against the real
# daemon, then all of it again on an AddressSanitizer + UndefinedBehaviorSanitizer build, and
# the unit tests on a ThreadSanitizer build.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    skip the sanitizer passes
#   scripts/test.sh --serial   one stage after the other (by default the plain integration
#                              tests and the TSan unit tests run beside the ASan+UBSan stages:
#                              most of their time is spent waiting on daemons, leases, clients)
#   scripts/test.sh --long     also the slow ones: build the Debian packages (debian/) and
#                              install them on this machine (test_deb.py, needs root), and
#                              build the libFuzzer targets with clang (build-fuzz) and run
#                              each for 10 s on a copy of its corpus (bench/fuzz_long.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
serial=0
for a in "$@"; do
  case $a in
  --quick) quick=1 ;;
  --serial) serial=1 ;;
  --long) export OPENLAKE_LONG=1 ;;
  *) echo "usage: scripts/test.sh [--quick] [--serial] [--long]" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3
failed=()
t0=$(date +%s)

stage() { # name, command...
  local name=$1
  shift
  echo "=== $name"
  local s=$(date +%s)
  if "$@"; then
    echo "=== $name: ok ($(($(date +%s) - s)) s)"
  else
    echo "=== $name: FAILED ($(($(date +%s) - s)) s)"
    failed+=("$name")
  fi
}

pytest_run() { # build dir, extra env...
  local build=$1
  shift
  # the 20 slowest steps at the end of each pass: where the suite's time goes. Two xdist
  # workers per pass (OPENLAKE_TEST_WORKERS), each taking whole files (a module's fixtures
  # are made once): most of a test's time is spent waiting on daemons, leases and clients,
  # and four streams of that keep two cores busier than two did
  env OPENLAKE_BUILD="$build" "$@" $PY -m pytest -q -p no:cacheprovider --durations=20 \
    -n "${OPENLAKE_TEST_WORKERS:-2}" --dist loadfile tests/integration
  local rc=$?
  [ $rc -eq 5 ] && { echo "pytest: no tests collected"; return 1; }
  return $rc
}

# The stages of the background chain run in a subshell, their output kept in a log and shown
# when the chain ends (so the log of the stages in the foreground stays readable); the names
# of those that failed come back through a file.
bg_pid=
bg_start() { # log, function
  bg_log=$1
  bg_t=$(date +%s)
  rm -f "$bg_log.failed"
  echo "=== started in the background: $2 (log $bg_log)"
  set -m # its own process group, so that an interrupted run stops all of it
  (
    failed=()
    "$2"
    echo "${failed[*]}" >"$bg_log.failed"
  ) >"$bg_log" 2>&1 &
  bg_pid=$!
  set +m
}
bg_wait() {
  [ -n "$bg_pid" ] || return 0
  wait "$bg_pid"
  bg_pid=
  echo "=== the background chain, $(($(date +%s) - bg_t)) s:"
  cat "$bg_log"
  local f
  f=$(cat "$bg_log.failed" 2>/dev/null) || f="(the background chain did not finish)"
  [ -n "$f" ] && failed+=("$f")
}
trap '[ -n "$bg_pid" ] && kill -- "-$bg_pid" 2>/dev/null' EXIT

scripts/deps.sh test || { echo "dependency install failed"; exit 1; }
# --long builds the Debian packages (test_deb.py): debhelper, dh-python, lintian
if [ "${OPENLAKE_LONG:-}" = 1 ]; then
  scripts/deps.sh deb || { echo "dependency install failed"; exit 1; }
fi
stage "build" scripts/build.sh build
# fast (seconds): include layering, duplicate global symbols in build/src/*.a, clang-format
stage "source check" $PY scripts/check_source.py --build build
stage "unit tests" meson test -C build --print-errorlogs --num-processes 2
# The plain integration pass and then the ThreadSanitizer unit tests (the loops, the striped
# KV engine, the node plane and the client library are multi-threaded) in the background,
# while the ASan+UBSan build and its unit and integration tests run in the foreground: most of
# the integration passes' time is spent waiting on daemons, leases and clients. Each pass
# picks ports from its own range (conftest.py's free_port), so the two never collide.
plain_chain() {
  stage "integration tests" pytest_run build OPENLAKE_TEST_PORTS=10000-20999
  [ $quick -eq 1 ] && return
  # UCX's memory hooks (libucm, loaded with libopenlake) crash under TSan's interceptors
  stage "build (tsan)" scripts/build.sh build-tsan -Db_sanitize=thread -Db_lundef=false \
    -Dbuildtype=debug
  # TSan runs the tests 5-15x slower than the build their meson timeouts are set for (the HTTP
  # test's 2 x 256 MiB streams took 38 s here alone, over 120 s beside a loaded suite)
  stage "unit tests (tsan)" env TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    UCX_MEM_EVENTS=no meson test -C build-tsan --print-errorlogs --num-processes 2 --suite unit \
    --timeout-multiplier 3
}
if [ $quick -eq 1 ] || [ $serial -eq 1 ]; then
  plain_chain
else
  bg_start build/integration-tests.log plain_chain
fi

if [ $quick -eq 0 ]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  stage "build (asan+ubsan)" scripts/build.sh build-asan -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=debug
  stage "unit tests (asan+ubsan)" meson test -C build-asan --print-errorlogs --num-processes 2
  # the daemon runs sanitized; Python loads the plain client library (an ASan .so cannot be
  # loaded into an uninstrumented interpreter)
  stage "integration tests (asan+ubsan daemon)" pytest_run build-asan \
    OPENLAKE_LIBRARY="$PWD/build/client/libopenlake.so" OPENLAKE_TEST_PORTS=21000-32767
fi
bg_wait

# --long: the libFuzzer build (clang; the suite's own build is gcc, so nothing else would see
# it rot) and a short run of every target
if [ "${OPENLAKE_LONG:-}" = 1 ]; then
  stage "build (fuzz)" env CC=clang scripts/build.sh build-fuzz -Dfuzz=true -Db_lundef=false
  stage "fuzz targets, 10 s each" bench/fuzz_long.sh -t 10 -b build-fuzz
fi

echo "=== total $(($(date +%s) - t0)) s"
if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED stages: ${failed[*]}"
  exit 1
fi
echo "all stages passed"

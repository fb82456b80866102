#!/usr/bin/python3
"""Source checks run early by scripts/test.sh (issue 9). Each prints file:line problems and the
script exits 1 when any check fails.

  layering    an `#include "x/..."` is allowed only along an edge of the layer diagram in
              docs/ARCHITECTURE.md (ALLOWED below is that diagram; change both together)
  symbols     no global symbol is defined in two of the built static libraries (build/src)
  format      clang-format --dry-run --Werror over the tracked C files
  self-test   the checks' own logic on known good and bad cases (runs first)

  scripts/check_source.py [--build DIR] [--only self-test,layering,symbols,format]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# module -> modules its files may include (besides its own folder). "openlake" is the public
# client API (include/openlake/). Keep in step with docs/ARCHITECTURE.md, "Layers".
ALLOWED = {
    "cmd/openlaked": {"s3", "admin", "http", "store", "meta", "kv", "cluster", "codec", "io",
                      "base", "s3/auth", "tls", "node"},
    "cmd/openlake": {"base", "cluster", "codec", "openlake", "io", "s3/auth", "node"},
    "s3": {"s3/auth", "http", "store", "base"},
    "admin": {"s3/auth", "http", "store", "base"},
    "s3/auth": {"base"},
    "kv": {"io", "base", "openlake", "tls"},  # io: the per-core loops
    "cluster": {"base"},
    "http": {"io", "base", "tls"},
    "store": {"meta", "node", "io", "base"},  # node: the client (remote drives)
    "meta": {"base"},
    "codec": set(),
    "io": {"base"},
    "tls": {"base"},
    "node": {"io", "meta", "base"},  # meta: the server serves drives' indexes
    "base": set(),
    "client": {"kv", "codec", "openlake", "io"},  # io: io/ucx.c, library grade
}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def tracked(*patterns):
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "--", *patterns],
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.split("\n") if p]


def module_of(path):
    """Module of a source file (src/s3/auth/x.c -> s3/auth, cmd/openlake/x.c -> cmd/openlake),
    None for files outside the layered tree (tests, bench, tools)."""
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2:
        if parts[1] == "s3" and parts[2] == "auth" and len(parts) > 3:
            return "s3/auth"
        return parts[1]
    if parts[0] == "cmd" and len(parts) > 2:
        return "cmd/" + parts[1]
    if parts[0] == "client":
        return "client"
    return None


def target_of(inc):
    """Module an include names ("store/store.h" -> store), None for a same-folder include."""
    if "/" not in inc:
        return None
    if inc.startswith("s3/auth/"):
        return "s3/auth"
    return inc.split("/")[0]


def include_problem(mod, inc):
    """Why module mod may not include inc, or None when it may."""
    if inc.startswith("../"):
        return f'#include "{inc}" climbs out of the module; include by module path'
    tgt = target_of(inc)
    if tgt is None or tgt == mod or tgt in ALLOWED[mod]:
        return None
    if tgt not in ALLOWED and tgt != "openlake":
        return None  # a header of the same folder in a subfolder, e.g. "cuda/x.h"
    return (f'{mod}/ may not include "{inc}" ({mod} -> {tgt} is not an edge of the layer '
            "diagram, docs/ARCHITECTURE.md)")


def check_layering():
    bad = []
    for path in tracked("*.c", "*.h"):
        mod = module_of(path)
        if mod is None:
            continue
        if mod not in ALLOWED:
            bad.append(f"{path}:1: module '{mod}' is not in the layer table of "
                       "scripts/check_source.py (add it with its allowed edges)")
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            for no, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                why = m and include_problem(mod, m.group(1))
                if why:
                    bad.append(f"{path}:{no}: {why}")
    return bad


def check_symbols(build):
    libs = []
    for dirpath, _, files in os.walk(os.path.join(build, "src")):
        libs += [os.path.join(dirpath, f) for f in files
                 if f.startswith("lib") and f.endswith(".a")]
    if not libs:
        return [f"{build}/src: no static libraries found (build first: scripts/build.sh)"]
    where = {}
    for lib in sorted(libs):
        out = subprocess.run(["nm", "--defined-only", "-g", "-A", lib], capture_output=True,
                             text=True)
        if out.returncode != 0:
            return [f"nm failed on {lib}: {out.stderr.strip()}"]
        parse_nm(out.stdout, build, where)
    return duplicates(where)


def parse_nm(text, build, where):
    """Add the strong global definitions of `nm -A` output to where (symbol -> places)."""
    for line in text.split("\n"):
        # "lib.a:obj.o:0000 T name"
        fields = line.rsplit(" ", 2)
        if len(fields) != 3 or fields[1] in ("W", "V", "w", "v", "U"):
            continue
        archive, obj = fields[0].rsplit(":", 1)[0].split(":", 1)
        where.setdefault(fields[2], []).append(
            f"{os.path.relpath(archive, build)}({os.path.basename(obj)})")


def duplicates(where):
    return [f"duplicate global symbol {sym}: defined in {' and '.join(places)}"
            for sym, places in sorted(where.items()) if len(places) > 1]


def self_test():
    """The checks' own logic on known cases: a check that passes everything must fail here."""
    assert include_problem("s3", "admin/admin.h"), "s3 -> admin must be refused"
    assert include_problem("store", "http/http.h"), "store -> http must be refused"
    assert include_problem("io", "store/store.h"), "io -> store (up) must be refused"
    assert include_problem("s3/auth", "s3/s3int.h"), "s3/auth -> s3 (up) must be refused"
    assert include_problem("kv", "../base/log.h"), "climbing includes must be refused"
    assert include_problem("client", "base/log.h"), "client must not see base"
    for mod, inc in (("store", "io/io.h"), ("s3", "s3/auth/sigv4.h"), ("s3", "store/store.h"),
                     ("admin", "s3/auth/sigv4.h"), ("cmd/openlaked", "admin/admin.h"),
                     ("kv", "openlake/openlake.h"), ("s3", "s3util.h")):
        assert not include_problem(mod, inc), f"{mod} -> {inc} must be allowed"
    where = {}
    parse_nm("build/src/io/libol_io.a:uring.c.o:0000000000000120 T ol_io_batch\n"
             "build/src/io/libol_io.a:io.c.o:0000000000000010 T ol_io_listen\n"
             "build/src/store/libol_store.a:shard.c.o:0000000000000160 T ol_io_batch\n"
             "build/src/base/libol_base.a:log.c.o:0000000000000000 W weak_ok\n"
             "build/src/kv/libol_kv.a:x.c.o:0000000000000000 W weak_ok\n", "build", where)
    d = duplicates(where)
    assert len(d) == 1 and "ol_io_batch" in d[0] and "libol_store.a(shard.c.o)" in d[0], d
    return []


def check_format():
    files = tracked("*.c", "*.h")
    out = subprocess.run(["clang-format", "--dry-run", "--Werror", *files], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode == 0:
        return []
    names = sorted({m.group(1) for m in re.finditer(r"^([^\s:]+):\d+:\d+: error",
                                                   out.stderr, re.M)})
    return [f"{n}: not clang-formatted (run: clang-format -i {n})" for n in names] or \
        [out.stderr.strip()[:2000]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="self-test,layering,symbols,format")
    a = ap.parse_args()
    checks = {"self-test": self_test, "layering": check_layering, "symbols": lambda: check_symbols(a.build),
              "format": check_format}
    failed = False
    for name in a.only.split(","):
        bad = checks[name]()
        for b in bad:
            print(b)
        print(f"check_source {name}: {'FAILED (%d)' % len(bad) if bad else 'ok'}")
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

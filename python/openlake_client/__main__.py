"""python3 -m openlake_client stats [--nodes h:p,...] [--device tcp] [--json]"""

import argparse
import json
import sys

from . import metrics


def _fmt_bytes(n):
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024


def _print_pool(st, out):
    tot = st.get("total", {})
    print("pool: %d node(s)" % len(st.get("nodes", [])), file=out)
    for n in st.get("nodes", []):
        print("  %-22s %s%s" % (n.get("addr"), "up" if n.get("up") else "DOWN",
                                " (local shm)" if n.get("local") else ""), file=out)
    rows = [("dram", "dram_used", "dram_capacity"), ("nvme", "nvme_used", "nvme_capacity")]
    for name, u, c in rows:
        print("  %-5s used %s of %s" % (name, _fmt_bytes(tot.get(u)), _fmt_bytes(tot.get(c))),
              file=out)
    hits, misses = tot.get("hits", 0) or 0, tot.get("misses", 0) or 0
    rate = 100.0 * hits / (hits + misses) if hits + misses else 0.0
    print("  entries %s  hits %s  misses %s (%.1f%% hit)  evictions %s"
          % (tot.get("entries", 0), hits, misses, rate, tot.get("evictions", 0)), file=out)
    if "hits_dram" in tot or "hits_nvme" in tot:
        print("  hits by tier: dram %s  nvme %s   demotions %s  promotions %s  corrupt %s"
              % (tot.get("hits_dram", 0), tot.get("hits_nvme", 0), tot.get("demotions", 0),
                 tot.get("promotions", 0), tot.get("corrupt", 0)), file=out)
    if "backlog_bytes" in tot:
        print("  write-behind: backlog %s in %s blocks, oldest %.1f s, dropped unwritten %s"
              % (_fmt_bytes(tot.get("backlog_bytes")), tot.get("backlog_blocks", 0),
                 (tot.get("backlog_oldest_ms", 0) or 0) / 1000.0,
                 tot.get("writeback_dropped", 0)), file=out)
    for n in st.get("nodes", []):
        s = n.get("stats") or {}
        if s.get("promise"):
            print("  %s writeback %s: %s" % (n.get("addr"), s.get("writeback"), s["promise"]),
                  file=out)


def _print_connectors(recs, out):
    if not recs:
        print("connectors: none running on this host", file=out)
        return
    for r in recs:
        m = r["metrics"]
        print("connector %s (pid %d): hit %d / miss %d tokens (%.1f%%), loaded %s, saved %s, "
              "load p50 %.2f ms p99 %.2f ms, save p50 %.2f ms, failures load %d save %d "
              "lookup %d, corrupt %d"
              % (r["tag"], r["pid"], m["hit_tokens"], m["miss_tokens"], 100 * m["hit_rate"],
                 _fmt_bytes(m["bytes_loaded"]), _fmt_bytes(m["bytes_saved"]), m["load_ms_p50"],
                 m["load_ms_p99"], m["save_ms_p50"], m["load_failures"], m["save_failures"],
                 m["lookup_failures"], m["corrupt_blocks"]), file=out)


def cmd_stats(a, out=sys.stdout):
    from .client import connect

    recs = metrics.read_published(a.metrics_dir)
    try:
        c = connect(a.nodes.split(","), device=a.device, timeout_ms=a.timeout_ms)
    except ImportError as e:
        print("openlake: %s" % e, file=sys.stderr)
        return 2
    try:
        st = c.stats()
    finally:
        c.close()
    if a.json:
        json.dump({"pool": st, "connectors": recs}, out, indent=2)
        print(file=out)
    else:
        _print_pool(st, out)
        _print_connectors(recs, out)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m openlake_client")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stats", help="print the pool's state and local connector metrics")
    s.add_argument("--nodes", default="127.0.0.1:9400", help="comma-separated host:port list")
    s.add_argument("--device", default="tcp", choices=("local", "tcp", "ucx"))
    s.add_argument("--timeout-ms", type=int, default=2000)
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--metrics-dir", default=None, help="where connectors publish metrics")
    a = p.parse_args(argv)
    if a.cmd == "stats":
        return cmd_stats(a)
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""Loops pinned to cores and the host's locality in `openlake node info`, against a real
openlaked (issue 9): with pin_threads = "auto" (the default) each KV loop thread may run on
one CPU only, the N-th of the daemon's affinity mask (taskset is respected); with "off" they
run anywhere the daemon may. `openlake node info --json` reports the data dirs' devices as
the kernel names them, the loops' CPUs as /proc shows them, and the NICs of the bound
addresses. The placement on a host of several NUMA nodes (accepts on the NIC's node) is
tested on a synthetic 2-socket topology in tests/unit/test_topo.c: this machine has one."""

import json
import os
import subprocess

import pytest

from conftest import OPENLAKE_CLI, wait_for

pytestmark = pytest.mark.skipif(not OPENLAKE_CLI.exists(), reason=f"{OPENLAKE_CLI} is not built")


def cli(*args, timeout=60):
    return subprocess.run([str(OPENLAKE_CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def cpu_list(text):
    """"0-2,5" -> [0, 1, 2, 5]"""
    out = []
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def loop_threads(pid):
    """{kv-loop-N: [CPUs its Cpus_allowed_list allows]} of process pid."""
    loops = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/status") as f:
                allowed = next(l for l in f if l.startswith("Cpus_allowed_list:"))
        except (FileNotFoundError, StopIteration):
            continue  # a thread that just ended
        if name.startswith("kv-loop-"):
            loops[name] = cpu_list(allowed.split(":", 1)[1])
    return loops


def status_locality(d):
    """The daemon's locality as `openlake node info --json` reports it, once it is there (the
    daemon sets it before it says it is ready)."""
    def get():
        r = cli("node", "info", "--config", d.config, "--json")
        if r.returncode != 0:
            return None
        return json.loads(r.stdout).get("locality")
    return wait_for(get, timeout=120, what="the locality in node info")


def kernel_device(path):
    """The device under path as the kernel names it: the whole disk of a block device (sysfs),
    else the file system's type (mountinfo)."""
    dev = os.stat(path).st_dev
    maj, mi = os.major(dev), os.minor(dev)
    if maj:
        base = f"/sys/dev/block/{maj}:{mi}"
        if os.path.exists(base + "/partition"):
            base += "/.."
        with open(base + "/uevent") as f:
            return next(l.split("=", 1)[1].strip() for l in f if l.startswith("DEVNAME="))
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[2] == f"{maj}:{mi}":
                return line.split(" - ", 1)[1].split()[0]
    return None


def wait_loops(d, n):
    return wait_for(lambda: (lambda l: l if len(l) == n else None)(loop_threads(d.proc.pid)),
                    timeout=120, what=f"{n} kv-loop threads")


def test_pinned_loops_and_node_info(openlaked):
    mask = sorted(os.sched_getaffinity(0))  # the daemon inherits it
    d = openlaked()
    loops = wait_loops(d, min(len(mask), 64))
    for i in range(len(loops)):
        assert loops[f"kv-loop-{i}"] == [mask[i]], loops  # loop N on the N-th allowed CPU

    loc = status_locality(d)
    assert loc["pin_threads"] == "auto"
    assert [(l["name"], l["cpu"]) for l in loc["loops"]] == \
        [(f"kv-loop-{i}", mask[i]) for i in range(len(loops))]
    assert all(l["accepts"] for l in loc["loops"]), loc  # one NUMA node here, or loopback
    nodes = [n["node"] for n in loc["nodes"]]
    assert nodes and all(cpu_list(n["cpus"]) for n in loc["nodes"])
    assert all(l["node"] in nodes for l in loc["loops"])

    spill = str(d.root / "kv")
    assert [(x["service"], x["path"]) for x in loc["drives"]] == \
        [("s3", p) for p in d.data_dirs] + [("kv", spill)]
    for x in loc["drives"]:
        assert x["device"] == kernel_device(x["path"]), x
        assert x["node"] is None or x["node"] in nodes
    nics = {n["service"]: n for n in loc["nics"]}
    assert nics["kv"]["addr"] == d.kv_addr and nics["kv"]["ifname"] == "lo"
    assert nics["kv"]["node"] is None  # loopback has no PCI locality
    assert nics["s3"]["addr"] == f"127.0.0.1:{d.s3_port}"
    assert isinstance(loc["gpus"], list) and loc["warnings"] == []

    r = cli("node", "info", "--config", d.config)
    assert r.returncode == 0, r.stderr
    assert "numa     node %d: CPUs" % nodes[0] in r.stdout, r.stdout
    assert "pinned (pin_threads = auto)" in r.stdout
    assert d.data_dirs[0] in r.stdout and kernel_device(d.data_dirs[0]) in r.stdout
    assert "WARNING" not in r.stdout
    assert d.stop() == 0, d.log()  # a clean exit (and under ASan: nothing leaked)


def test_taskset_mask_is_respected(openlaked):
    mask = sorted(os.sched_getaffinity(0))
    cpu = mask[-1]
    os.sched_setaffinity(0, {cpu})  # the daemon inherits this thread's mask, as under taskset
    try:
        d = openlaked(mode="kv", extra='dram_bytes = "64MiB"\nspill_bytes = 0\n')
    finally:
        os.sched_setaffinity(0, mask)
    loops = wait_loops(d, 1)  # one loop per CPU the daemon may use
    assert loops == {"kv-loop-0": [cpu]}, loops
    loc = status_locality(d)
    assert [l["cpu"] for l in loc["loops"]] == [cpu]
    assert [x["path"] for x in loc["drives"]] == [str(d.root / "kv")]  # a KV pool: its spill dir


def test_pin_threads_off_leaves_loops_unpinned(openlaked):
    mask = sorted(os.sched_getaffinity(0))
    d = openlaked(args=["--pin_threads", "off"])
    loops = wait_loops(d, min(len(mask), 64))
    assert all(cpus == mask for cpus in loops.values()), (loops, mask)
    loc = status_locality(d)
    assert loc["pin_threads"] == "off"
    assert all(l["cpu"] is None and l["node"] is None for l in loc["loops"]), loc
    r = cli("node", "info", "--config", d.config)
    assert "0 pinned (pin_threads = off)" in r.stdout, r.stdout
    assert d.stop() == 0, d.log()

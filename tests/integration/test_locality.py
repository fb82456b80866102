"""Loops pinned to cores and the host's locality in `openlake node info`, against a real
openlaked (issue 9): with pin_threads = "auto" (the default) each KV loop thread may run on
one CPU only, the N-th of the daemon's affinity mask (taskset is respected); with "off" they
run anywhere the daemon may. `openlake node info --json` reports the data dirs' devices as
the kernel names them, the loops' CPUs as /proc shows them, and the NICs of the bound
addresses. The placement on a host of several NUMA nodes (accepts on the NIC's node) is
tested on a synthetic 2-socket topology in tests/unit/test_topo.c, and here end to end on a
2-socket host as hwloc's own XML input presents it (HWLOC_XMLFILE: this machine has one node):
two NUMA nodes over two of our CPUs, the drive on node 0, the NIC and a GPU on node 1."""

import json
import os
import socket
import subprocess
import time

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


# ---- a 2-socket host, as hwloc's own XML input presents one (HWLOC_XMLFILE) ----

XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" {all} gp_index="1">
{packages}
  </object>
</topology>
"""
PACKAGE = """    <object type="Package" os_index="{n}" {sets} gp_index="{g0}">
      <object type="NUMANode" os_index="{n}" {sets} gp_index="{g1}" local_memory="1073741824"/>
      <object type="Core" os_index="{cpu}" {sets} gp_index="{g2}">
        <object type="PU" os_index="{cpu}" {sets} gp_index="{g3}"/>
      </object>
      <object type="Bridge" gp_index="{g4}" bridge_type="0-1" depth="0"
              bridge_pci="0000:[{bus:02x}-{bus:02x}]">
{devices}
      </object>
    </object>"""
PCIDEV = ("""        <object type="PCIDev" gp_index="{g}" pci_busid="0000:{bus:02x}:{dev:02x}.0" """
          """pci_type="{cls} [{vendor}:0001] [{vendor}:0001] 01" pci_link_speed="0.000000">"""
          """{osdev}</object>""")


def sets(cpus, nodes, allowed=False):
    cs, ns = "0x%08x" % sum(1 << c for c in cpus), "0x%08x" % sum(1 << n for n in nodes)
    a = f' allowed_cpuset="{cs}" allowed_nodeset="{ns}"' if allowed else ""
    return f'cpuset="{cs}" complete_cpuset="{cs}" nodeset="{ns}" complete_nodeset="{ns}"{a}'


def two_socket_xml(cpus, disk, nic):
    """Package n: NUMA node n, CPU cpus[n]; node 0 holds disk's PCI device, node 1 the NIC and
    an NVIDIA GPU (0000:81:04.0)."""
    devs = [[(0x0180, "1af4", disk, 0)], [(0x0200, "1af4", nic, 2), (0x0302, "10de", None, 0)]]
    pk = []
    for n in (0, 1):
        g = 100 * (n + 1)
        lines = []
        for i, (cls, vendor, name, typ) in enumerate(devs[n]):
            osdev = (f'<object type="OSDev" gp_index="{g + 10 + i}" name="{name}" '
                     f'osdev_type="{typ}"/>' if name else "")
            lines.append(PCIDEV.format(g=g + 20 + i, bus=0x80 * n + n, dev=3 + i,
                                       cls="%04x" % cls, vendor=vendor, osdev=osdev))
        pk.append(PACKAGE.format(n=n, cpu=cpus[n], sets=sets([cpus[n]], [n]), g0=g, g1=g + 1,
                                 g2=g + 2, g3=g + 3, g4=g + 4, bus=0x80 * n + n,
                                 devices="\n".join(lines)))
    return XML.format(all=sets(cpus, [0, 1], allowed=True), packages="\n".join(pk))


def pci_nic_with_ipv4():
    """(interface, IPv4 address) of a PCI network interface of this host, or None."""
    for name in sorted(os.listdir("/sys/class/net")):
        if "/devices/pci" not in os.path.realpath(f"/sys/class/net/{name}"):
            continue
        r = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", name], capture_output=True,
                           text=True)
        for line in r.stdout.splitlines():
            return name, line.split()[3].split("/")[0]
    return None


def start_on(openlaked, root_xml, cpus, kv_addr, extra_args=()):
    """A KV pool with the daemon's affinity mask = cpus and hwloc reading root_xml."""
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))
    os.environ["HWLOC_XMLFILE"] = str(root_xml)
    try:
        return openlaked(mode="kv", kv=False, extra='dram_bytes = "64MiB"\nspill_bytes = 0\n',
                         args=["--kv_addr", kv_addr, *extra_args])
    finally:
        del os.environ["HWLOC_XMLFILE"]
        os.sched_setaffinity(0, mask)


def loop_cpu_ns(pid):
    """{kv-loop-N: nanoseconds on a CPU}: schedstat's run time (exact; utime + stime are
    clock ticks, sampled: a short burst of work can be charged nothing), else the ticks."""
    tick_ns = 10**9 // os.sysconf("SC_CLK_TCK")
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                st = f.read()
            name = st[st.index("(") + 1:st.rindex(")")]
            if not name.startswith("kv-loop-"):
                continue
            try:
                with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                    out[name] = int(f.read().split()[0])
            except FileNotFoundError:  # a kernel without CONFIG_SCHED_INFO
                fields = st[st.rindex(")") + 2:].split()
                out[name] = (int(fields[11]) + int(fields[12])) * tick_ns
        except FileNotFoundError:
            continue
    return out


def test_two_socket_host_accepts_on_the_nics_node(openlaked, tmp_path):
    from conftest import free_port
    from test_kv_loops import key, raw_get, raw_put, val
    from test_kv_security import raw_hello

    mask = sorted(os.sched_getaffinity(0))
    nic = pci_nic_with_ipv4()
    if len(mask) < 2 or nic is None:
        pytest.skip("needs 2 CPUs and an IPv4 address on a PCI network interface")
    ifname, ip = nic
    cpus = mask[:2]
    disk = kernel_device(str(tmp_path))
    xml = tmp_path / "two-socket.xml"
    xml.write_text(two_socket_xml(cpus, disk, ifname))
    port = free_port()
    d = start_on(openlaked, xml, cpus, f"{ip}:{port}")
    loc = status_locality(d)
    assert [(n["node"], cpu_list(n["cpus"])) for n in loc["nodes"]] == \
        [(0, [cpus[0]]), (1, [cpus[1]])], loc
    assert [(l["cpu"], l["node"], l["accepts"]) for l in loc["loops"]] == \
        [(cpus[0], 0, False), (cpus[1], 1, True)], loc  # only the NIC's node accepts TCP
    assert [(n["ifname"], n["node"]) for n in loc["nics"]] == [(ifname, 1)], loc
    assert loc["gpus"] == [{"pci": "0000:81:04.0", "node": 1}], loc
    assert loc["warnings"] == [], loc

    # the work of TCP connections runs on the loop of the NIC's node only: rounds of puts
    # and gets until that loop has run 200 ms (a generous bound on the wall time it takes)
    before = loop_cpu_ns(d.proc.pid)
    conns = [socket.create_connection((ip, port), timeout=60) for _ in range(4)]
    busy, i, deadline = {}, 0, time.monotonic() + 600
    try:
        for s in conns:
            raw_hello(s, local=False)
        while busy.get("kv-loop-1", 0) < 200_000_000 and time.monotonic() < deadline:
            for _ in range(100):
                s = conns[i % 4]
                assert raw_put(s, key("numa", i), val(i, 64 * 1024)) == 0
                assert raw_get(s, key("numa", i), 64 * 1024)[1] == val(i, 64 * 1024)
                i += 1
            after = loop_cpu_ns(d.proc.pid)
            busy = {n: after[n] - before[n] for n in after}
    finally:
        for s in conns:
            s.close()
    assert busy["kv-loop-1"] > 0 and busy["kv-loop-0"] * 4 <= busy["kv-loop-1"], busy
    assert d.stop() == 0, d.log()

    # a mask without the NIC's node: every loop accepts, and node info says what is wrong
    d = start_on(openlaked, xml, cpus[:1], f"{ip}:{free_port()}")
    loc = status_locality(d)
    assert [(l["cpu"], l["accepts"]) for l in loc["loops"]] == [(cpus[0], True)], loc
    assert len(loc["warnings"]) == 1 and "NIC %s of kv" % ifname in loc["warnings"][0], loc
    r = cli("node", "info", "--config", d.config)
    assert "WARNING  NIC %s of kv" % ifname in r.stdout, r.stdout
    assert "locality: NIC %s" % ifname in d.log()  # also logged at start
    assert d.stop() == 0, d.log()

    # unpinned on a host of two nodes: a warning of its own
    d = start_on(openlaked, xml, cpus, f"{ip}:{free_port()}", ("--pin_threads", "off"))
    loc = status_locality(d)
    assert any("not pinned" in w for w in loc["warnings"]), loc
    assert all(l["accepts"] for l in loc["loops"]), loc
    assert d.stop() == 0, d.log()

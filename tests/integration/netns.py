"""A private network of Linux network namespaces for partition tests (issue 10).

    net = Net(hosts=["e0", "e1", "e2", "n0", "n1", "n2", "n3"])   # root only
    try:
        net.ip("n0")                    # "10.X.Y.21": the host's address on the bridge
        p = net.popen("n0", [cmd...], stdout=f)   # a process inside n0's namespace
        net.cut("n0")                   # n0 reaches only the test (root namespace)
        net.cut("n0", only=["e0", "e1", "e2"])    # n0 loses just these hosts
        net.cut("n0", only=["n1"], direction="out")  # n0's packets to n1 vanish, n1's arrive
        net.join("n0")                  # the partition ends
    finally:
        net.close()                     # every process by pid, then namespaces by name

Layout: a hub namespace holding a bridge; one namespace per host with a veth pair whose
other end is a port of the bridge; the root namespace (the test and its clients: boto3, the
CLI) gets an address on the bridge through one more veth pair. Addresses come from a private
10.X.Y.0/24 that no route of the root namespace uses. A partition is an nftables table in the
host's namespace that drops what goes out of or comes in on its bridge link (never loopback),
or only one of the two (a one-way cut), so TCP sees silence, not resets, like a real cut
cable. Names carry the test process's pid,
so concurrent runs do not meet; close() removes everything this Net made, and only that.
"""

import os
import random
import shutil
import signal
import subprocess

IP = shutil.which("ip")
NFT = shutil.which("nft")


def unavailable():
    """Why namespace tests cannot run here (None when they can)."""
    if os.geteuid() != 0:
        return "network-namespace partition tests need root (ip netns, nft)"
    if not IP:
        return "iproute2 (ip) is not installed"
    if not NFT:
        return "nftables (nft) is not installed: scripts/deps.sh test installs it"
    probe = f"olprobe{os.getpid()}"
    r = subprocess.run([IP, "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns is unavailable here: {r.stderr.strip()}"
    try:
        r = subprocess.run([IP, "netns", "exec", probe, NFT, "list", "tables"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return f"nft does not work in a network namespace here: {r.stderr.strip()}"
    finally:
        subprocess.run([IP, "netns", "del", probe], capture_output=True)
    return None


def _run(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def _free_subnet():
    used = _run(IP, "-4", "route", "show", "table", "all").stdout
    rng = random.Random(os.getpid())
    for _ in range(1000):
        a, b = rng.randint(64, 250), rng.randint(1, 250)
        if f"10.{a}.{b}." not in used:
            return f"10.{a}.{b}"
    raise RuntimeError("no free 10.X.Y.0/24 subnet")


class Net:
    def __init__(self, hosts):
        self.tag = f"ol{os.getpid() % 1000000}"
        self.hub = f"{self.tag}-hub"
        self.ns = {h: f"{self.tag}-{h}" for h in hosts}
        self.base = _free_subnet()
        self.addr = {h: f"{self.base}.{20 + i}" for i, h in enumerate(hosts)}
        self.root_ip = f"{self.base}.1"
        self.root_if = f"{self.tag}r"
        self.procs = []
        self.made_ns = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _ns_add(self, name):
        _run(IP, "netns", "add", name)
        self.made_ns.append(name)
        _run(IP, "-n", name, "link", "set", "lo", "up")

    def _build(self):
        self._ns_add(self.hub)
        _run(IP, "-n", self.hub, "link", "add", "br0", "type", "bridge")
        _run(IP, "-n", self.hub, "link", "set", "br0", "up")
        # the root namespace's leg
        _run(IP, "link", "add", self.root_if, "type", "veth", "peer", "name", "root", "netns",
             self.hub)
        _run(IP, "-n", self.hub, "link", "set", "root", "master", "br0", "up")
        _run(IP, "addr", "add", f"{self.root_ip}/24", "dev", self.root_if)
        _run(IP, "link", "set", self.root_if, "up")
        for i, (h, ns) in enumerate(self.ns.items()):
            self._ns_add(ns)
            port = f"p{i}"
            _run(IP, "-n", self.hub, "link", "add", port, "type", "veth", "peer", "name",
                 "eth0", "netns", ns)
            _run(IP, "-n", self.hub, "link", "set", port, "master", "br0", "up")
            _run(IP, "-n", ns, "addr", "add", f"{self.addr[h]}/24", "dev", "eth0")
            _run(IP, "-n", ns, "link", "set", "eth0", "up")

    def ip(self, host):
        return self.addr[host]

    def popen(self, host, argv, **kw):
        """argv run inside host's namespace (ip netns exec execs it: the pid is argv's)"""
        p = subprocess.Popen([IP, "netns", "exec", self.ns[host], *map(str, argv)], **kw)
        self.procs.append(p)
        return p

    def run(self, host, argv, **kw):
        return subprocess.run([IP, "netns", "exec", self.ns[host], *map(str, argv)], **kw)

    def nft(self, host, script):
        r = subprocess.run([IP, "netns", "exec", self.ns[host], NFT, "-f", "-"], input=script,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"nft in {host}: {r.stderr.strip()}\n{script}")

    def cut(self, host, only=None, direction="both"):
        """Drop host's traffic on its bridge link: with every other host (the root namespace,
        where the test and its clients are, still reaches it), or with just the hosts in
        only. direction: "both", "out" (only what host sends is dropped: its packets to them
        vanish, theirs still arrive) or "in" (only what host receives from them). Over TCP a
        one-way drop stalls a connection in both directions (the ACKs of one side are lost)
        rather than refusing it: a new connection's SYN or SYN-ACK is lost, and data sent on
        an open one may arrive while its acknowledgement does not."""
        if direction not in ("both", "out", "in"):
            raise ValueError(f"direction {direction!r}: both, out or in")
        if only is None:
            out = f"ip daddr != {self.root_ip} drop"
            inn = f"ip saddr != {self.root_ip} drop"
        else:
            peers = ", ".join(self.addr[h] for h in only)
            out = f"ip daddr {{ {peers} }} drop"
            inn = f"ip saddr {{ {peers} }} drop"
        out = f'oifname "eth0" {out}; ' if direction in ("both", "out") else ""
        inn = f'iifname "eth0" {inn}; ' if direction in ("both", "in") else ""
        self.join(host)
        self.nft(host, f"""table inet olpart {{
  chain out {{ type filter hook output priority 0; policy accept; {out}}}
  chain in {{ type filter hook input priority 0; policy accept; {inn}}}
}}
""")

    def join(self, host):
        """End host's partition (no-op without one)."""
        self.run(host, [NFT, "delete", "table", "inet", "olpart"], capture_output=True,
                 timeout=60)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(30)
        self.procs = []
        for ns in reversed(self.made_ns):  # a namespace takes its links (and bridge) along
            _run(IP, "netns", "del", ns, check=False)
        self.made_ns = []
        _run(IP, "link", "del", self.root_if, check=False)  # gone with the hub already

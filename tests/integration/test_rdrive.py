"""An erasure set over drives of real openlaked processes (store/rdrive.c, issue 10).

Four openlaked nodes, each with [cluster] secret set (the node plane on rpc_addr, no etcd),
each serving a second data dir that its own local store does not use ([cluster]
plane_only_drives = 1: the last data dir is the node plane's alone; the first forms its local
set). build/src/store/rset_cli opens a set N=4 P=1 over
those four remote drives and PUTs objects (inline and multi-block) while one node is killed
with kill -9 mid-PUT: every acknowledged object reads back bit-exact with that node dead; the
node restarts, heal makes its drive whole, and with another node killed the objects the first
one missed read back from its healed copy.
"""

import subprocess
import time

from conftest import BUILD, Daemon, wait_for, wait_port

RSET_CLI = BUILD / "src" / "store" / "rset_cli"
SECRET = "rdrive-integration-secret-0123"


def node(root):
    root.mkdir()
    d = Daemon(root, drives=2, set_drive_count=1, parity=0, kv=False,
               extra=f'\n[cluster]\nsecret = "{SECRET}"\nplane_only_drives = 1\n')
    d.start()
    assert wait_port(d.rpc_port, 30, d.proc), d.log()
    return d


def rset(nodes, *cmd, stdin=None, timeout=120):
    peers = [f"127.0.0.1:{d.rpc_port}#1" for d in nodes]
    return subprocess.run([str(RSET_CLI), SECRET, "1", "1", *peers, "--", *cmd], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def test_kill9_mid_put_loses_no_acknowledged_object(tmp_path):
    assert RSET_CLI.exists(), f"{RSET_CLI} is not built"
    nodes = []
    try:
        for i in range(4):
            nodes.append(node(tmp_path / f"n{i}"))
        peers = [f"127.0.0.1:{d.rpc_port}#1" for d in nodes]
        put = subprocess.Popen([str(RSET_CLI), SECRET, "1", "1", *peers, "--", "put", "obj",
                                "90", "60"], stdout=subprocess.PIPE, text=True)
        acked, errs, killed_at = [], [], None
        deadline = time.time() + 120
        for line in put.stdout:
            assert time.time() < deadline, "the PUT loop ran past its time"
            word, key = line.split()[:2]
            (acked if word == "ACK" else errs).append(key)
            if killed_at is None and len(acked) >= 12:
                nodes[1].kill9()  # mid-PUT: the loop is writing its next object
                killed_at = len(acked)
        assert put.wait(60) == 0
        assert killed_at is not None, f"only {len(acked)} PUTs acknowledged"
        assert len(acked) > killed_at + 10, \
            f"PUTs stopped after the kill: {len(acked)} acked, {len(errs)} errors {errs[:5]}"

        print(f"{len(acked)} PUTs acknowledged ({killed_at} before the kill), {len(errs)} failed")
        keys = "\n".join(acked) + "\n"
        r = rset(nodes, "verify", stdin=keys)
        assert r.returncode == 0 and r.stdout.count("OK ") == len(acked), r.stdout[-2000:]

        nodes[1].start()
        assert wait_port(nodes[1].rpc_port, 30, nodes[1].proc)
        r = rset(nodes, "heal")
        assert r.returncode == 0, r.stdout + r.stderr
        print(r.stdout.strip())
        assert " unrecoverable 0" in r.stdout and " shards_healed 0 " not in r.stdout, r.stdout

        nodes[2].kill9()  # what node 2 missed now has to come from its healed drive
        r = rset(nodes, "verify", stdin=keys)
        assert r.returncode == 0 and r.stdout.count("OK ") == len(acked), r.stdout[-2000:]
    finally:
        for d in nodes:
            d.cleanup()

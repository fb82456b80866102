"""The web console in a real browser (headless Chromium driven by chromedriver + selenium) against
a running daemon under a little S3 load: an admin signs in, the charts move, a figure shown
matches /metrics, a file is uploaded (progress bar), listed, downloaded, shared by a presigned
link and deleted through the page, every call signed in the browser; a second user signed in
sees none of the admin's buckets and is refused on them. Screenshots go to the test's tmp dir
(the path is printed). Skips, saying why, only when Chromium cannot start at all."""

import hashlib
import json
import os
import pathlib
import re
import shutil
import threading
import time
import urllib.request

import pytest

from conftest import ACCESS_KEY, SECRET_KEY, admin_get, boto3_client, wait_for
from s3_users import USERS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser(download_dir):
    """A headless Chromium, or pytest.skip with the reason it cannot start."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        pytest.skip("python3-selenium is not installed (%s): apt-get install python3-selenium "
                    "chromium-driver, or scripts/deps.sh test" % e)
    if not os.path.exists(DRIVER) or not os.path.exists(CHROMIUM):
        pytest.skip("chromium / chromedriver not found (%s, %s): apt-get install chromium "
                    "chromium-driver" % (CHROMIUM, DRIVER))
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,2000", "--no-first-run", "--disable-extensions"):
        o.add_argument(a)
    o.add_experimental_option("prefs", {"download.default_directory": str(download_dir),
                                        "download.prompt_for_download": False})
    try:
        drv = webdriver.Chrome(service=Service(DRIVER), options=o)
    except Exception as e:  # cannot start at all: say why
        pytest.skip("headless Chromium cannot start here: %s" % str(e).splitlines()[0])
    drv.set_page_load_timeout(60)
    drv.execute_cdp_cmd("Page.setDownloadBehavior",
                        {"behavior": "allow", "downloadPath": str(download_dir)})
    return drv


class Load:
    """Small PUT/GET load from another thread: bounded in count and time, stopped by stop()."""

    def __init__(self, url, seconds=80, max_ops=20000):
        self.s3 = boto3_client(url)
        self.s3.create_bucket(Bucket="load")
        self.stop_ev = threading.Event()
        self.ops = 0
        self.deadline = time.monotonic() + seconds
        self.max_ops = max_ops
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        body = os.urandom(4096)
        while (not self.stop_ev.is_set() and self.ops < self.max_ops and
               time.monotonic() < self.deadline):
            k = "k%d" % (self.ops % 50)
            self.s3.put_object(Bucket="load", Key=k, Body=body)
            self.s3.get_object(Bucket="load", Key=k)["Body"].read()
            self.ops += 2
            time.sleep(0.01)

    def stop(self):
        self.stop_ev.set()
        self.t.join(30)
        assert not self.t.is_alive()


def metric(url, name, **labels):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^(\w+)(?:\{([^}]*)\})?\s+(\S+)$", line)
        if m and m.group(1) == name and (m.group(2) or "") == want:
            return float(m.group(3))
    return None


def test_console_in_a_browser(openlaked, tmp_path):
    d = openlaked(extra=USERS)
    shots = tmp_path / "screenshots"
    downloads = tmp_path / "downloads"
    shots.mkdir()
    downloads.mkdir()
    print("console screenshots in", shots)
    load = Load(d.s3_url)
    drv = browser(downloads)
    try:
        run_console(d, drv, load, shots, downloads, tmp_path)
    finally:
        load.stop()
        drv.quit()


def js(drv, script, *args):
    return drv.execute_script(script, *args)


def click(drv, by, what):
    """A click on the element, delivered to it (the click event a user's click fires). Not at
    its coordinates, as WebDriver's click is: the charts above the object browser refresh every
    2 s and their legends wrap onto another line when an operation first appears, so the
    page's layout can move between WebDriver's scroll and its click, and the click land on the
    row next to the one meant ("load/" for "console-b/": the likely cause of a wait for
    console-b's listing that timed out once under the full suite)."""
    js(drv, "arguments[0].click()", drv.find_element(by, what))


def text(drv, el_id):
    return js(drv, "return document.getElementById(arguments[0]).textContent", el_id)


def sign_in(drv, ak, sk):
    js(drv, "document.getElementById('ak').value = arguments[0];"
            "document.getElementById('sk').value = arguments[1];", ak, sk)
    click(drv, "id", "signin")
    wait_for(lambda: ak in text(drv, "loginmsg") or "refused" in text(drv, "loginmsg"), 30,
             "the sign-in to be checked")


def run_console(d, drv, load, shots, downloads, tmp_path):
    s3 = boto3_client(d.s3_url)
    drv.get(d.s3_url + "/openlake/console")
    sign_in(drv, ACCESS_KEY, SECRET_KEY)
    assert "signed in as " + ACCESS_KEY in text(drv, "loginmsg")
    # the secret is nowhere in the page: not in the form, not in storage
    assert js(drv, "return document.getElementById('sk').value") == ""
    assert js(drv, "return sessionStorage.length + localStorage.length") == 0
    wait_for(lambda: "node 0" in text(drv, "node"), 30, "the node's status in the page")
    # no [cluster] etcd: the status says so and the page shows no etcd members or sets
    st, body = admin_get(d, "/openlake/admin/v1/status")
    assert st == 200 and json.loads(body)["cluster"] is None
    assert js(drv, "return document.getElementById('etcdcluster').classList.contains('hidden')")

    # the charts move under the load
    def moved():
        pts = int(js(drv, "return document.getElementById('c-s3rate').dataset.points || 0"))
        mx = float(js(drv, "return document.getElementById('c-s3rate').dataset.max || 0"))
        return pts >= 3 and mx > 0
    wait_for(moved, 60, "the S3 request-rate chart to plot the load")
    assert "PutObject" in text(drv, "c-s3rate") and "GetObject" in text(drv, "c-s3rate")
    wait_for(lambda: float(js(drv, "return document.getElementById('c-s3p99').dataset.max || 0"))
             > 0, 30, "the p99 latency chart")
    assert "dram" in text(drv, "c-kvtier") and "drives online" in text(drv, "c-disk")
    drv.save_screenshot(str(shots / "1-charts.png"))

    # object browser: make a bucket, upload a file with progress, see it listed
    top = lambda: js(drv, "const r = document.getElementById('newbucket').getBoundingClientRect();"
                          "return r.top + window.scrollY")
    top0 = top()
    js(drv, "document.getElementById('newbucket').value = 'console-b'")
    click(drv, "id", "mkbucket")
    wait_for(lambda: js(drv, "return !!document.querySelector('tr[data-bucket=\"console-b\"]')"),
             30, "the new bucket in the listing")
    # the object browser stayed put while the charts above it redrew: CreateBucket joined the
    # request-rate chart's series (its legend wrapped to a second line here, which moved
    # every row below it), and every legend takes one height whatever its count of series
    wait_for(lambda: "CreateBucket" in text(drv, "c-s3rate"), 30, "CreateBucket charted")
    heights = js(drv, "return [...document.querySelectorAll('.legend')].map(e => e.offsetHeight)")
    assert len(heights) >= 6 and len(set(heights)) == 1, heights
    assert top() == top0, "the object browser moved as the charts redrew: %s -> %s" % (top0, top())
    click(drv, "css selector", 'tr[data-bucket="console-b"] button')
    wait_for(lambda: "console-b/" in text(drv, "browsermsg"), 30, "the bucket's listing")
    payload = os.urandom(3 << 20) + b"end"
    src = tmp_path / "from browser.bin"
    src.write_bytes(payload)
    drv.find_element("id", "file").send_keys(str(src))
    click(drv, "id", "upload")
    try:  # generous: chromium and the daemon share a loaded 2-core machine with the suite
        wait_for(lambda: re.search("uploaded|refused|failed|choose a file",
                                   text(drv, "browsermsg")), 180, "the upload to finish")
    except AssertionError as e:  # say where it stood: the page's message, its progress bar
        drv.save_screenshot(str(shots / "upload-timeout.png"))
        raise AssertionError("%s: message %r, progress %s, daemon log: %s" % (
            e, text(drv, "browsermsg"), js(drv, "return document.getElementById('progress').value"),
            d.log()[-3000:])) from None
    assert "uploaded from browser.bin" in text(drv, "browsermsg"), text(drv, "browsermsg")
    assert float(js(drv, "return document.getElementById('progress').value")) == 100
    assert s3.get_object(Bucket="console-b", Key="from browser.bin")["Body"].read() == payload
    wait_for(lambda: js(drv, "return !!document.querySelector('tr[data-key=\"from browser.bin\"]')"),
             30, "the uploaded object in the listing")
    drv.save_screenshot(str(shots / "2-uploaded.png"))

    # download through the page: the file lands in the browser's download dir
    click(drv, "css selector", 'button[data-act="download"][data-key="from browser.bin"]')
    got = downloads / "from browser.bin"
    wait_for(lambda: got.exists() and got.stat().st_size == len(payload), 60,
             "the browser's download")
    assert hashlib.sha256(got.read_bytes()).hexdigest() == hashlib.sha256(payload).hexdigest()
    assert js(drv, "return document.getElementById('browsermsg').dataset.sha256") == \
        hashlib.sha256(payload).hexdigest()

    # share: a presigned link that works without keys
    click(drv, "css selector", 'button[data-act="share"][data-key="from browser.bin"]')
    wait_for(lambda: js(drv, "return document.getElementById('shareurl').value"), 30,
             "the presigned link")
    url = js(drv, "return document.getElementById('shareurl').value")
    assert "X-Amz-Signature=" in url and "X-Amz-Expires=3600" in url
    assert urllib.request.urlopen(url, timeout=30).read() == payload
    drv.save_screenshot(str(shots / "3-shared.png"))

    # delete through the page
    js(drv, "window.confirm = () => true")
    click(drv, "css selector", 'button[data-act="delete"][data-key="from browser.bin"]')
    wait_for(lambda: "deleted from browser.bin" in text(drv, "browsermsg"), 30, "the delete")
    with pytest.raises(Exception) as e:
        s3.head_object(Bucket="console-b", Key="from browser.bin")
    assert "404" in str(e.value)

    # a figure shown matches /metrics: once the load stopped, the page's PutObject count
    # converges to the daemon's (the page itself sends no PutObject now)
    load.stop()
    want = lambda: metric(d.s3_url, "openlake_s3_requests_total", op="PutObject")
    shown = lambda: js(drv, "const e = document.querySelector('tr[data-op=\"PutObject\"] td.req');"
                            "return e ? Number(e.textContent) : -1")
    wait_for(lambda: shown() == want(), 30, "the PutObject count shown to equal /metrics")
    assert shown() >= load.ops // 2
    drv.save_screenshot(str(shots / "4-figures.png"))

    # the KV panel: a client's namespace with the figures of /metrics (a real client over TCP)
    from vllm_standin.pool import require_pool_binaries
    require_pool_binaries()
    import openlake_client as ol
    kv = ol.connect([d.kv_addr], device="tcp", namespace="console-ns", timeout_ms=10000)
    try:
        keys = [hashlib.sha256(b"console-kv-%d" % i).digest() for i in range(4)]
        vals = [os.urandom(4096 * (i + 1)) for i in range(3)]
        assert kv.put(keys[:3], vals) == [ol.Status.OK] * 3
        assert kv.get(keys) == vals + [None]
    finally:
        kv.close()
    # a local client (shm: ALLOC/COMMIT and LOOKUP over the socket, the bytes in shared memory)
    # is counted under its own namespace the same way
    loc = ol.connect([d.kv_addr], device="local", namespace="console-shm", timeout_ms=10000)
    try:
        assert loc.put(keys[:2], vals[:2]) == [ol.Status.OK] * 2
        assert loc.get(keys[:3]) == vals[:2] + [None]  # keys[2] is console-ns's, not ours
    finally:
        loc.close()
    shm = {f: metric(d.s3_url, "openlake_kv_ns_%s_total" % f, namespace="console-shm")
           for f in ("puts", "put_bytes", "hits", "misses")}
    assert shm == {"puts": 2, "put_bytes": len(vals[0]) + len(vals[1]), "hits": 2,
                   "misses": 1}, shm
    want = {f: metric(d.s3_url, "openlake_kv_ns_%s_total" % f, namespace="console-ns")
            for f in ("puts", "put_bytes", "hits", "misses")}
    assert want == {"puts": 3, "put_bytes": sum(map(len, vals)), "hits": 3, "misses": 1}, want
    # what the namespace holds now (gauges): its 3 blocks, in DRAM
    now = [metric(d.s3_url, "openlake_kv_ns_%s" % f, namespace="console-ns", tier="dram")
           for f in ("blocks", "bytes")]
    assert now == [3, sum(map(len, vals))], now

    def kv_row():
        return js(drv, "const r = document.querySelector('#kvnsrows tr[data-ns=\"console-ns\"]');"
                       "return r ? [Number(r.querySelector('.puts').textContent),"
                       " Number(r.querySelector('.bytes').dataset.v),"
                       " Number(r.querySelector('.hits').textContent),"
                       " Number(r.querySelector('.misses').textContent),"
                       " Number(r.querySelector('.dram').dataset.blocks),"
                       " Number(r.querySelector('.dram').dataset.v)] : null")
    wait_for(lambda: kv_row() == [want["puts"], want["put_bytes"], want["hits"], want["misses"]]
             + now,
             30, "the KV panel's console-ns row to equal /metrics")
    drv.save_screenshot(str(shots / "4b-kv-namespaces.png"))

    # a second user: sees none of the admin's buckets, is refused on them, is not an admin
    click(drv, "id", "signout")
    sign_in(drv, "alicekey", "alicesecret")
    wait_for(lambda: "no buckets yet" in text(drv, "browsermsg"), 30, "alice's empty bucket list")
    assert "console-b" not in text(drv, "listing") and "load" not in text(drv, "listing")
    js(drv, "go('console-b/')")
    wait_for(lambda: "refused" in text(drv, "browsermsg"), 30, "alice refused on the admin's bucket")
    assert "AccessDenied" in text(drv, "browsermsg")
    wait_for(lambda: "not an admin" in text(drv, "node"), 30, "the page to say alice is no admin")
    drv.save_screenshot(str(shots / "5-second-user.png"))

    # the admin listener serves the console too (node, charts), and points to S3's for objects
    drv.get(d.admin_url + "/openlake/console")
    sign_in(drv, ACCESS_KEY, SECRET_KEY)
    wait_for(lambda: "node 0" in text(drv, "node"), 30, "the node on the admin listener")
    wait_for(lambda: "S3 port's console" in text(drv, "browsermsg"), 30, "the S3 console hint")
    assert d.s3_url + "/openlake/console" in text(drv, "browsermsg")
    wait_for(lambda: int(js(drv, "return document.getElementById('c-disk').dataset.points || 0"))
             >= 2, 30, "the disk chart on the admin listener")
    drv.save_screenshot(str(shots / "6-admin-listener.png"))
    for p in sorted(shots.iterdir()):
        assert p.stat().st_size > 1000, p


# ---- the cluster panel: 4 daemons over a real etcd (test_cluster_store.py's helpers) ----

def cluster_status(node):
    st, body = admin_get(node, "/openlake/admin/v1/status")
    assert st == 200, body
    return json.loads(body)


def test_console_cluster_panel(tmp_path):
    """A 4-node cluster store over a real etcd; one non-leader is killed with -9. The status
    document of a surviving node lists the 3 live members (leased keys in etcd) and the set's
    leader and epoch as etcd holds them; the console shows the same: 3 live, the killed node
    down (from [[nodes]]), the set's leader and epoch."""
    import test_cluster_store as tcs
    import test_etcd_cluster as tec
    if not tec.ETCD or not tec.ETCDCTL:
        pytest.skip("etcd-server / etcd-client not installed")
    (tmp_path / "etcd").mkdir()
    (tmp_path / "nodes").mkdir()
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    e = tcs.Etcd(tmp_path / "etcd", n=1)
    try:
        gen = tcs.start_cluster(tmp_path / "nodes", e)
        c = next(gen)
        try:
            run_cluster_panel(c, downloads, tmp_path)
        finally:
            gen.close()  # stops every node it started
    finally:
        e.stop()


def run_cluster_panel(c, downloads, tmp_path):
    lead, epoch = c.leader()
    victim = next(i for i in range(4) if i != lead)
    alive = sorted(i for i in range(4) if i != victim)
    c.nodes[victim].kill9()
    # Chromium starts while the killed node's lease runs out (started after it, the two added up)
    drv = browser(downloads)
    try:
        node = c.nodes[lead]

        def members():
            cl = cluster_status(node)["cluster"]
            return sorted(m["id"] for m in cl["members"])
        wait_for(lambda: members() == alive, 120, "the killed node's lease to lapse in etcd")
        cl = cluster_status(node)["cluster"]
        for m in cl["members"]:
            n = c.nodes[m["id"]]
            assert m["live"] and m["s3_addr"] == "127.0.0.1:%d" % n.s3_port
            assert m["rpc_addr"] == "127.0.0.1:%d" % n.rpc_port and m["drives"] == 1
        assert cl["epoch"] > 0
        s0 = [x for x in cl["sets"] if (x["pool"], x["set"]) == (0, 0)]
        assert len(s0) == 1 and s0[0]["self"], cl
        assert (s0[0]["leader"], s0[0]["epoch"]) == c.leader() == (lead, epoch)
        assert s0[0]["leader_s3_addr"] == "127.0.0.1:%d" % node.s3_port

        drv.get(node.url + "/openlake/console")
        sign_in(drv, ACCESS_KEY, SECRET_KEY)
        wait_for(lambda: "node %d" % lead in text(drv, "node"), 60, "the node's status")
        wait_for(lambda: not js(drv, "return document.getElementById('etcdcluster')"
                                     ".classList.contains('hidden')"), 60, "the cluster panel")

        def rows():
            return js(drv, "return [...document.querySelectorAll('#cmembers tr')].map((r) =>"
                           " [Number(r.dataset.member), r.querySelector('td.live').textContent])")
        want = sorted([[i, "live"] for i in alive] + [[victim, "down"]])
        wait_for(lambda: sorted(rows()) == want, 60, "3 live members and the killed one down")
        assert "127.0.0.1:%d" % node.s3_port in text(drv, "cmembers")
        leader_cell = js(drv, "const r = document.querySelector('#csets tr[data-set=\"0.0\"]');"
                              "return r ? [r.querySelector('td.leader').textContent,"
                              " Number(r.querySelector('td.epoch').textContent)] : null")
        assert leader_cell == ["node %d 127.0.0.1:%d" % (lead, node.s3_port), epoch]
        drv.save_screenshot(str(tmp_path / "cluster-panel.png"))
        print("cluster panel screenshot:", tmp_path / "cluster-panel.png")
    finally:
        drv.quit()

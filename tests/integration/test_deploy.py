"""The deployment files: the Docker image's package lists and the Helm chart.

The chart is rendered with `helm template` where helm is installed, else with
tests/helm_render (Go's text/template + sprig from Debian's packages, built here: `scripts/deps.sh
deploy` installs them); without either the chart tests skip, saying so. Every config the chart
gives a pod goes through the chart's own init script (as its init container runs it) and then
`openlaked --check-config`.
"""

import os
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import BUILD, OPENLAKED, REPO

CHART = REPO / "deploy" / "helm" / "openlake"
GOPATH = "/usr/share/gocode"


def _apt_stages(path):
    """The packages each stage of a Dockerfile installs with apt-get, stage by stage."""
    text = path.read_text().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            stages.append(set())
        for m in re.finditer(r"apt-get install ([^&;]*)", line):
            stages[-1].update(w for w in m.group(1).split() if not w.startswith("-"))
    return stages


def _packages_of(binaries):
    """Debian packages of the shared libraries the binaries load (ldd, then one dpkg -S)."""
    libs = set()
    for b in binaries:
        out = subprocess.run(["ldd", str(b)], capture_output=True, text=True, check=True).stdout
        libs |= set(re.findall(r"=> (/\S+)", out))
    paths = sorted(libs | {"/usr" + lib for lib in libs})  # usrmerge: either may be listed
    out = subprocess.run(["dpkg", "-S"] + paths, capture_output=True, text=True).stdout
    owner = {}
    for line in out.splitlines():
        pkg, _, path = line.partition(": ")
        owner[path.strip()] = pkg.split(":")[0]
    pkgs = set()
    for lib in libs:
        pkg = owner.get(lib) or owner.get("/usr" + lib)
        assert pkg, "%s loads %s, which no Debian package owns" % (binaries, lib)
        pkgs.add(pkg)
    return pkgs


def _with_depends(pkgs):
    """pkgs and what apt installs with them: their Depends, recursively (as installed here)"""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Depends}", p], capture_output=True,
                           text=True)
        for alt in r.stdout.split(","):
            name = alt.split("|")[0].split("(")[0].split(":")[0].strip()
            if name:
                todo.append(name)
    return seen


@pytest.mark.parametrize("image,programs", [
    ("openlaked", ["cmd/openlaked/openlaked", "cmd/openlake/openlake", "client/libopenlake.so"]),
    ("openlake", ["cmd/openlake/openlake", "client/libopenlake.so"]),
])
def test_docker_image_installs_what_the_binaries_load(image, programs):
    if not shutil.which("dpkg") or not shutil.which("ldd"):
        pytest.skip("needs dpkg and ldd (Debian)")
    dockerfile = REPO / "deploy" / "docker" / (image + ".Dockerfile")
    stages = _apt_stages(dockerfile)
    assert len(stages) == 2, "the Dockerfile has a build stage and a runtime stage"
    build, runtime = stages
    # the build stage has every -dev library scripts/deps.sh builds with
    deps = (REPO / "scripts" / "deps.sh").read_text()
    listed = re.search(r"BUILD=\(([^)]*)\)", deps).group(1).split()
    missing = sorted(p for p in listed if p.endswith("-dev") and p not in build)
    assert not missing, "%s's build stage lacks %s (scripts/deps.sh)" % (dockerfile.name, missing)
    # the runtime stage has every library the installed programs load
    need = _packages_of([BUILD / b for b in programs])
    need -= {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:bookworm-slim itself
    # the sanitizer pass's binaries load their runtimes; the images build without them
    need = {p for p in need if not re.fullmatch(r"lib[alt]san\d+|libubsan\d+", p)}
    missing = sorted(need - _with_depends(runtime))
    assert not missing, "%s's runtime stage lacks %s" % (dockerfile.name, missing)


def _renderer(tmp_path_factory):
    helm = shutil.which("helm")
    if helm:
        return lambda args: [helm, "template", "ol", str(CHART)] + args
    go = shutil.which("go")
    if not go or not (pathlib.Path(GOPATH) / "src/github.com/Masterminds/sprig").is_dir():
        pytest.skip("no helm, and no Go with sprig to render the chart with tests/helm_render: "
                    "scripts/deps.sh deploy installs them")
    d = tmp_path_factory.mktemp("helm_render")
    env = dict(os.environ, GOPATH=GOPATH, GO111MODULE="off", GOCACHE=str(d / "cache"))
    exe = d / "helm_render"
    subprocess.run([go, "build", "-o", str(exe), str(REPO / "tests/helm_render/main.go")],
                   env=env, check=True, timeout=600)
    return lambda args: [str(exe), str(CHART), "--name", "ol"] + args


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    cmd = _renderer(tmp_path_factory)

    def run(sets, ok=True):
        args = ["--namespace", "lake"]
        for s in sets:
            args += ["--set", s]
        r = subprocess.run(cmd(args), capture_output=True, text=True, timeout=120)
        if not ok:
            assert r.returncode != 0, "the chart rendered: %s" % sets
            return r.stderr
        assert r.returncode == 0, r.stderr
        docs = [d for d in yaml.safe_load_all(r.stdout) if d]
        return {(d["kind"], d["metadata"]["name"]): d for d in docs}

    return run


def pod_config(objs, tmp_path, hostname, domain=""):
    """The config a pod gets: the chart's init script run on its ConfigMap and Secret."""
    cm = objs[("ConfigMap", "ol-config")]["data"]
    sec = objs[("Secret", "ol-credentials")]["stringData"]
    cfg, secd = tmp_path / ("cfg-" + hostname), tmp_path / ("sec-" + hostname)
    cfg.mkdir()
    secd.mkdir()
    for k, v in cm.items():
        (cfg / k).write_text(v)
    for k, v in sec.items():
        (secd / k).write_text(v)
    out = tmp_path / (hostname + ".toml")
    env = {"PATH": os.environ["PATH"], "CFG": str(cfg), "SEC": str(secd), "OUT": str(out),
           "HOSTNAME": hostname, "DOMAIN_SUFFIX": domain}
    subprocess.run(["sh", str(cfg / "init.sh")], env=env, check=True, capture_output=True)
    return out


def check_config(path):
    r = subprocess.run([str(OPENLAKED), "--config", str(path), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, "%s: %s%s" % (path, r.stdout, r.stderr)


def print_config(path):
    r = subprocess.run([str(OPENLAKED), "--config", str(path), "--print-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_chart_single_node(render, tmp_path):
    objs = render([])
    sts = objs[("StatefulSet", "ol")]
    assert sts["spec"]["replicas"] == 1
    assert ("StatefulSet", "ol-etcd") not in objs, "no etcd without a cluster"
    assert len(sts["spec"]["volumeClaimTemplates"]) == 4
    check_config(pod_config(objs, tmp_path, "ol-0"))


def test_chart_cluster(render, tmp_path):
    objs = render(["replicaCount=4", "diskCount=2", "cluster.enabled=true",
                   "cluster.secret=s3cr3t-plane-key", "s3Domains={s3.lake.example,objects.lan}"])
    sts = objs[("StatefulSet", "ol")]
    assert sts["spec"]["replicas"] == 4 and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == "ol-hl"
    inits = {c["name"]: c for c in sts["spec"]["template"]["spec"]["initContainers"]}
    assert "openlake cluster init" in " ".join(inits["cluster-init"]["command"])
    hl = objs[("Service", "ol-hl")]["spec"]
    assert hl["clusterIP"] == "None" and hl["publishNotReadyAddresses"] is True
    etcd = objs[("StatefulSet", "ol-etcd")]
    assert etcd["spec"]["replicas"] == 3 and etcd["spec"]["podManagementPolicy"] == "Parallel"
    args = " ".join(etcd["spec"]["template"]["spec"]["containers"][0]["args"])
    assert args.count("=http://ol-etcd-") == 3  # --initial-cluster names every member
    assert objs[("Service", "ol-etcd-hl")]["spec"]["clusterIP"] == "None"
    domain = next(e["value"] for e in inits["config"]["env"] if e["name"] == "DOMAIN_SUFFIX")
    assert domain == "ol-hl.lake.svc.cluster.local"
    for ordinal in (0, 2):
        path = pod_config(objs, tmp_path, "ol-%d" % ordinal, domain)
        check_config(path)
        text = path.read_text()
        assert re.search(r"^self_id = %d$" % ordinal, text, re.M)
        assert 'advertise = "ol-%d.ol-hl.lake.svc.cluster.local"' % ordinal in text
        assert 'secret = "s3cr3t-plane-key"' in text
        shown = print_config(path)
        assert len(re.findall(r"^\[\[nodes\]\]$", shown, re.M)) == 4, shown
        for i in range(4):
            assert '"ol-%d.ol-hl.lake.svc.cluster.local:9100"' % i in shown
        assert "set_drive_count = 4" in shown  # one drive of every set per node: 2 sets of 4
        # every node the same [s3] domains: a forwarded virtual-host request routes the same
        assert re.search(r'^domains = \["s3\.lake\.example", "objects\.lan"\]', shown, re.M), \
            shown
        assert "ol-etcd-2.ol-etcd-hl.lake.svc.cluster.local:2379" in shown


def test_chart_refuses_what_cannot_work(render):
    err = render(["replicaCount=3"], ok=False)
    assert "cluster.enabled" in err
    err = render(["replicaCount=3", "cluster.enabled=true"], ok=False)
    assert "cluster.secret" in err
    err = render(["mode=both"], ok=False)
    assert "storage or kv" in err


def test_chart_kv_pool_per_gpu_node(render, tmp_path):
    objs = render(["mode=kv", "kvPool.shmGid=2345"])
    assert ("StatefulSet", "ol") not in objs and ("Service", "ol") not in objs
    ds = objs[("DaemonSet", "ol-kv")]["spec"]["template"]["spec"]
    assert ds["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert ds["securityContext"]["supplementalGroups"] == [2345]
    vols = {v["name"]: v for v in ds["volumes"]}
    assert vols["shm"]["hostPath"]["path"] == "/var/run/openlake/shm"
    assert vols["run"]["hostPath"]["path"] == "/var/run/openlake/run"
    c = ds["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["shm"] == "/dev/shm" and mounts["run"] == "/run/openlake"
    assert c["ports"][0]["hostPort"] == 9400
    path = pod_config(objs, tmp_path, "ol-kv-x7k2p")
    check_config(path)
    shown = print_config(path)
    assert 'mode = "kv"' in shown and 'shm_group = "2345"' in shown
    assert 'unix_socket = "/run/openlake/kv.sock"' in shown

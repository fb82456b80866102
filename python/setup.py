"""Installable offline with Debian's setuptools, in a venv (PEP 668 keeps pip out of Debian's
own Python): python3 -m venv --system-site-packages V && V/bin/pip install ./python

A wheel that carries libopenlake (the package loads it from its own directory first):
OPENLAKE_BUNDLE_LIBRARY=/path/to/libopenlake.so.0 pip wheel --no-build-isolation ./python
(a platform wheel then, since it holds native code).

A wheel that also carries the daemon and the CLI (`pip install openlake-vllm` then `openlaked`):
OPENLAKE_BUNDLE_BIN=DIR (holding openlaked and openlake, e.g. a meson install's bin/) and
OPENLAKE_BUNDLE_CONFIGS=DIR (the example configs, configs/ of the checkout) copy them into
openlake_client/bin/ and openlake_client/configs/, and add the console scripts `openlaked` and
`openlake` (openlake_client/_bin.py runs the bundled program). Without them the wheel declares
neither script, so it never shadows a Debian-installed openlake on PATH."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

BUNDLE = os.environ.get("OPENLAKE_BUNDLE_LIBRARY", "")
BUNDLE_BIN = os.environ.get("OPENLAKE_BUNDLE_BIN", "")
BUNDLE_CONFIGS = os.environ.get("OPENLAKE_BUNDLE_CONFIGS", "")
PROGRAMS = ("openlaked", "openlake")


class BuildPy(build_py):
    """Copies $OPENLAKE_BUNDLE_LIBRARY into the built package (never into the checkout)."""

    def run(self):
        super().run()
        if BUNDLE:
            if not os.path.isfile(BUNDLE):
                raise SystemExit("OPENLAKE_BUNDLE_LIBRARY=%s: no such file (build libopenlake "
                                 "first: ninja -C build)" % BUNDLE)
            self.copy_file(BUNDLE, os.path.join(self.build_lib, "openlake_client",
                                                "libopenlake.so.0"))
        if BUNDLE_BIN:
            out = os.path.join(self.build_lib, "openlake_client", "bin")
            self.mkpath(out)
            for prog in PROGRAMS:
                src = os.path.join(BUNDLE_BIN, prog)
                if not os.access(src, os.X_OK):
                    raise SystemExit("OPENLAKE_BUNDLE_BIN=%s: no program %s in it (meson "
                                     "install, then point here at its bin/)" % (BUNDLE_BIN, prog))
                self.copy_file(src, os.path.join(out, prog))
                os.chmod(os.path.join(out, prog), 0o755)
        if BUNDLE_CONFIGS:
            out = os.path.join(self.build_lib, "openlake_client", "configs")
            self.mkpath(out)
            names = sorted(n for n in os.listdir(BUNDLE_CONFIGS) if n.endswith(".toml"))
            if not names:
                raise SystemExit("OPENLAKE_BUNDLE_CONFIGS=%s: no .toml in it" % BUNDLE_CONFIGS)
            for n in names:
                self.copy_file(os.path.join(BUNDLE_CONFIGS, n), os.path.join(out, n))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        # a bundled native library or program makes the wheel platform-specific
        return bool(BUNDLE or BUNDLE_BIN)


SCRIPTS = ["openlake-client=openlake_client.__main__:main"]
if BUNDLE_BIN:
    SCRIPTS += ["%s=openlake_client._bin:%s" % (p, p) for p in PROGRAMS]

setup(
    # the distribution name of the public OpenLake's package (`pip install openlake-vllm`);
    # the module stays openlake_client, as in vLLM's kv_connector_module_path
    name="openlake-vllm",
    version="0.1.0",
    description="Python client of the OpenLake KV-cache pool (ctypes over libopenlake) and "
    "its vLLM KV connector",
    license="Apache-2.0",
    packages=["openlake_client"],
    python_requires=">=3.9",
    extras_require={"torch": ["torch"], "numpy": ["numpy"]},
    entry_points={"console_scripts": SCRIPTS},
    cmdclass={"build_py": BuildPy},
    distclass=BinaryDistribution,
)

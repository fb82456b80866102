"""Installable offline with Debian's setuptools, in a venv (PEP 668 keeps pip out of Debian's
own Python): python3 -m venv --system-site-packages V && V/bin/pip install ./python

A wheel that carries libopenlake (the package loads it from its own directory first):
OPENLAKE_BUNDLE_LIBRARY=/path/to/libopenlake.so.0 pip wheel --no-build-isolation ./python
(a platform wheel then, since it holds native code)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

BUNDLE = os.environ.get("OPENLAKE_BUNDLE_LIBRARY", "")


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


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return bool(BUNDLE)  # a bundled native library makes the wheel platform-specific

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
    entry_points={"console_scripts": ["openlake-client=openlake_client.__main__:main"]},
    cmdclass={"build_py": BuildPy},
    distclass=BinaryDistribution,
)

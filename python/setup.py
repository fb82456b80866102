"""Installable offline with Debian's setuptools: /usr/bin/python3 -m pip install ./python"""

from setuptools import setup

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
)

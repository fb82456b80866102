"""The console scripts `openlaked` and `openlake` of a wheel built with OPENLAKE_BUNDLE_BIN
(python/setup.py): run the program bundled in openlake_client/bin/ in place of this process, with
the same arguments. The example configs lie in openlake_client/configs/ (`config_dir()`)."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def config_dir():
    """The directory of the bundled example configs (kv_local.toml, ...)."""
    return os.path.join(_HERE, "configs")


def _exec(prog):
    path = os.path.join(_HERE, "bin", prog)
    if not os.access(path, os.X_OK):
        sys.stderr.write("%s: this install of openlake-vllm carries no %s (%s); install the "
                         "Debian package or a wheel built with OPENLAKE_BUNDLE_BIN\n"
                         % (prog, prog, path))
        return 127
    os.execv(path, [prog] + sys.argv[1:])
    return 127  # not reached


def openlaked():
    return _exec("openlaked")


def openlake():
    return _exec("openlake")

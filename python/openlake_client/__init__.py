"""openlake_client: Python client of the OpenLake KV-cache pool, and its vLLM connector.

    import openlake_client as ol
    c = ol.connect(["127.0.0.1:9400"], device="local")   # or "tcp", "ucx"; namespace=, timeout_ms=
    c.put(keys, values)        # keys: 32-byte bytes; values: bytes-like, numpy, torch, lists
    c.get(keys)                # list of bytes / None;  c.get(keys, out=[...]) -> hit flags
    c.exists(keys); c.delete(keys); c.stats()

Importing needs neither libopenlake, numpy, torch nor vLLM: the library is loaded by
connect() ($OPENLAKE_LIBRARY, <repo>/$OPENLAKE_BUILD/client/, build*/client/, the system).
The vLLM connector is openlake_client.openlake_connector.OpenLakeConnector.
"""

from ._lib import KEY_BYTES, LibraryNotFound, available as library_available
from .client import Client, OpenLakeError, Status, connect, version
from .keys import ModelIdentity, chain_hashes, rank_key, seed_hash

__version__ = "0.1.0"

__all__ = ["Client", "connect", "Status", "OpenLakeError", "LibraryNotFound", "KEY_BYTES",
           "library_available", "version", "ModelIdentity", "chain_hashes", "rank_key",
           "seed_hash", "__version__"]

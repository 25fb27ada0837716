"""Python helpers for epochfs mounts.

``epochfs.admin``  talks to a mount's daemon over its admin socket (standard library only).
``epochfs.torch``  ``ShuffleAwareSampler``: a DistributedSampler that tells the mount the
                   epoch's order (imports torch; import it explicitly).

The benchmark harness (``epochfs_bench``, the lab's ``epochfs_lab``) is not part of this API
and not installed with it: tools/python/README.md.
"""

from .admin import (
    ADMIN_XATTR,
    MAX_MESSAGE_BYTES,
    AdminClient,
    EpochfsError,
    admin_socket_path,
    clear_order,
    register_order,
)

__all__ = [
    "ADMIN_XATTR",
    "MAX_MESSAGE_BYTES",
    "AdminClient",
    "EpochfsError",
    "admin_socket_path",
    "clear_order",
    "register_order",
]

"""Client side of the epochfs admin protocol (see fusefs/admin_protocol.h).

The mount root advertises a Unix stream socket in the xattr ``user.epochfs.admin``. Each
message, in both directions, is a 4-byte little-endian length followed by that many bytes of
UTF-8 JSON, at most 64 KiB. A request is ``{"cmd": NAME, ...}``; a reply is
``{"ok": true, ...}`` or ``{"ok": false, "code": CODE, "error": MESSAGE}``. Every request gets
one reply.

Standard library only.
"""

import base64
import json
import os
import socket
import struct

ADMIN_XATTR = "user.epochfs.admin"
MAX_MESSAGE_BYTES = 64 * 1024
DEFAULT_TIMEOUT_S = 10.0

# The admin commands, as fusefs/admin_protocol.h names them (its kCmd* constants; a unit
# test keeps the two equal). Requests use these, never the literal names.
CMD_STATUS = "status"
CMD_STATS = "stats"
CMD_METRICS = "metrics"
CMD_PEERS = "peers"
CMD_PLACEMENT = "placement"
CMD_PLANS = "plans"
CMD_PLAN_ENTRIES = "plan_entries"
CMD_REFRESH = "refresh"
CMD_UNMOUNT = "unmount"
CMD_UPGRADE = "upgrade"
CMD_LS = "ls"
CMD_WARM_ADD = "warm_add"
CMD_WARM_START = "warm_start"
CMD_WARM_PROGRESS = "warm_progress"
CMD_EVICT = "evict"
CMD_ORDER_BEGIN = "order_begin"
CMD_ORDER_APPEND = "order_append"
CMD_ORDER_COMMIT = "order_commit"
CMD_ORDER_CLEAR = "order_clear"
CMD_CHUNK_SHARDS = "chunk_shards"
CMD_SCHEMA = "schema"
# Sent by the epochfs command when a mount joins a running daemon.
CMD_JOIN = "join"

# The counters the clients read, as fusefs/admin_counters.h names them (its kStatus*/kStats*
# constants; CTest admin-command-names keeps the two equal, the golden test
# tests/integration/test_admin_names.py checks the daemon serves them). Read a value with
# reply_value(reply, STATS_...), never by literal keys. The command comes first in a path; a
# table column is STATS_STREAM_*: the key column_key(path) of each row of STATS_STREAMS.
STATUS_UPTIME = "status.uptime_s"
STATUS_DATASET_VERSION = "status.dataset.version"
STATUS_DATASET_FILES = "status.dataset.files"
STATUS_DATASET_DIRS = "status.dataset.dirs"
STATUS_DATASET_BYTES = "status.dataset.bytes"
STATUS_DATASET_PENDING_ADDITIONS = "status.dataset.pending_additions"
STATUS_RAM_USED_BYTES = "status.tiers.ram.used_bytes"
STATUS_RAM_CAPACITY_BYTES = "status.tiers.ram.capacity_bytes"
STATUS_DISK_USED_BYTES = "status.tiers.disk.used_bytes"
STATUS_DISK_CAPACITY_BYTES = "status.tiers.disk.capacity_bytes"
STATUS_DISK_DIR = "status.tiers.disk.dir"
STATS_UPTIME = "stats.uptime_s"
STATS_READ_REQUESTS = "stats.read_requests"
STATS_READ_BYTES = "stats.read_bytes"
STATS_COALESCED = "stats.coalesced"
STATS_SOURCE_ERRORS = "stats.source_errors"
STATS_RAM_HIT_BYTES = "stats.tiers.ram.hit_bytes"
STATS_RAM_HIT_CHUNKS = "stats.tiers.ram.hit_chunks"
STATS_RAM_USED_BYTES = "stats.tiers.ram.used_bytes"
STATS_RAM_CAPACITY_BYTES = "stats.tiers.ram.capacity_bytes"
STATS_RAM_EVICTIONS = "stats.tiers.ram.evictions"
STATS_RAM_OWNED_BYTES = "stats.tiers.ram.owned.bytes"
STATS_RAM_OWNED_EVICTIONS = "stats.tiers.ram.owned.evictions"
STATS_RAM_GUEST_BYTES = "stats.tiers.ram.guest.bytes"
STATS_RAM_GUEST_CHUNKS = "stats.tiers.ram.guest.chunks"
STATS_RAM_GUEST_EVICTIONS = "stats.tiers.ram.guest.evictions"
STATS_DISK_HIT_BYTES = "stats.tiers.disk.hit_bytes"
STATS_DISK_HIT_CHUNKS = "stats.tiers.disk.hit_chunks"
STATS_DISK_USED_BYTES = "stats.tiers.disk.used_bytes"
STATS_DISK_CAPACITY_BYTES = "stats.tiers.disk.capacity_bytes"
STATS_DISK_EVICTIONS = "stats.tiers.disk.evictions"
STATS_DISK_HEALTHY = "stats.tiers.disk.healthy"
STATS_DISK_ERRORS = "stats.tiers.disk.errors"
STATS_DISK_PROBES = "stats.tiers.disk.probes"
STATS_DISK_LAST_ERROR = "stats.tiers.disk.last_error"
STATS_PEER_HIT_BYTES = "stats.peer.hit_bytes"
STATS_PEER_HIT_CHUNKS = "stats.peer.hit_chunks"
STATS_SOURCE_BYTES = "stats.tiers.source.bytes"
STATS_SOURCE_CHUNKS = "stats.tiers.source.chunks"
STATS_SOURCE_READ_BYTES = "stats.tiers.source.read_bytes"
STATS_SOURCE_LATENCY_P50 = "stats.tiers.source.latency_us.p50"
STATS_SOURCE_LATENCY_P99 = "stats.tiers.source.latency_us.p99"
STATS_PREFETCH_INFLIGHT_BYTES = "stats.prefetch.inflight_bytes"
STATS_PREFETCH_PUSH_PAGE_CACHE = "stats.prefetch.push_page_cache"
STATS_PREFETCH_PUSHED_FILES = "stats.prefetch.pushed_files"
STATS_PREFETCH_PUSHED_BYTES = "stats.prefetch.pushed_bytes"
STATS_PREFETCH_PUSH_FAILURES = "stats.prefetch.push_failures"
STATS_STREAMS = "stats.prefetch.streams"
STATS_STREAM_RANK = "stats.prefetch.streams[].rank"
STATS_STREAM_EPOCH = "stats.prefetch.streams[].epoch"
STATS_STREAM_LENGTH = "stats.prefetch.streams[].length"
STATS_STREAM_POSITION = "stats.prefetch.streams[].position"
STATS_STREAM_LEAD_FILES = "stats.prefetch.streams[].lead_files"
STATS_STREAM_LEAD_SECONDS = "stats.prefetch.streams[].lead_seconds"
STATS_STREAM_STALLS = "stats.prefetch.streams[].stalls"
STATS_STREAM_HITS = "stats.prefetch.streams[].hits"
STATS_STREAM_PREFETCHED_FILES = "stats.prefetch.streams[].prefetched_files"
STATS_STREAM_PREFETCHED_BYTES = "stats.prefetch.streams[].prefetched_bytes"
STATS_MEMORY_RSS_BYTES = "stats.memory.rss_bytes"
STATS_MEMORY_PRESSURE_SHRINKS = "stats.memory.pressure.shrinks"
STATS_CHUNK_BUFFERS_IDLE_BYTES = "stats.memory.chunk_buffers.idle_bytes"
STATS_CHUNK_BUFFERS_SLAB_BYTES = "stats.memory.chunk_buffers.slab_bytes"
STATS_CHUNK_BUFFERS_SLAB_HOLE_BYTES = "stats.memory.chunk_buffers.slab_hole_bytes"
# Served by cluster mounts only (status.members, the staging tier of peer prefetch).
STATUS_MEMBERS_SELF = "status.members.self"
STATUS_MEMBERS_COUNT = "status.members.count"
STATUS_MEMBERS_LIVE_PEERS = "status.members.live_peers"
STATUS_MEMBERS_FITS = "status.members.fits"
STATUS_MEMBERS_DATASET_BYTES = "status.members.dataset_bytes"
STATUS_MEMBERS_LIVE_CAPACITY_BYTES = "status.members.live_capacity_bytes"
STATS_STAGING_HIT_BYTES = "stats.tiers.staging.hit_bytes"
STATS_STAGING_HIT_CHUNKS = "stats.tiers.staging.hit_chunks"
STATS_STAGING_USED_BYTES = "stats.tiers.staging.used_bytes"
STATS_STAGING_EVICTIONS = "stats.tiers.staging.evictions"
STATS_STAGING_REFUSED = "stats.tiers.staging.refused"
STATS_STAGING_STAGED_BYTES = "stats.tiers.staging.staged_bytes"

# The "code" of an {"ok": false} reply (fusefs/admin_protocol.h kErr*; EpochfsError.code).
ERR_PERMISSION_DENIED = "permission_denied"
ERR_INVALID = "invalid"
ERR_NOT_FOUND = "not_found"
ERR_TOO_LARGE = "too_large"
ERR_UNAVAILABLE = "unavailable"
ERR_FAILED = "failed"
ERR_INTERNAL = "internal"

_APPEND_HEAD = b'{"cmd":%s,"entries":[' % json.dumps(CMD_ORDER_APPEND).encode()
_APPEND_TAIL = b"]}"


class EpochfsError(Exception):
    """A mount that is not epochfs, a daemon that does not answer, or an {"ok": false} reply.

    ``code``: the reply's error code (ERR_*), None when there was no reply."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def column_key(path):
    """A table column's key in each row: "stats.prefetch.streams[].stalls" -> "stalls"."""
    return path.split("[].", 1)[1] if "[]." in path else path


def reply_value(reply, path, default=None):
    """The value at ``path`` (a STATS_*/STATUS_* constant) in ``reply``, the reply of the
    path's command (its first segment); ``default`` when a key on the way is absent."""
    value = reply
    for key in path.split(".")[1:]:
        if not isinstance(value, dict) or key not in value:
            return default
        value = value[key]
    return value


def _get_admin_xattr(path):
    # One place that reads the xattr, so tests on file systems without user xattrs can
    # replace it.
    return os.getxattr(path, ADMIN_XATTR)


def admin_socket_path(mountpoint):
    """The admin socket path a mount root advertises; EpochfsError if it advertises none."""
    try:
        return os.fsdecode(_get_admin_xattr(mountpoint))
    except FileNotFoundError:
        raise EpochfsError("%s: no such directory" % (mountpoint,)) from None
    except OSError as e:
        raise EpochfsError("%s: not an epochfs mount (%s)" % (mountpoint, e.strerror or e)) from None


def _encode(obj):
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise EpochfsError("message of %d bytes is over the %d-byte cap" % (len(data), MAX_MESSAGE_BYTES))
    return data


class AdminClient:
    """One connection to a mount's admin socket. Not thread-safe; use one per thread.

    ``with AdminClient("/mnt/data") as c: c.call({"cmd": CMD_STATUS})``
    """

    def __init__(self, mountpoint, timeout=DEFAULT_TIMEOUT_S):
        self.mountpoint = mountpoint
        path = admin_socket_path(mountpoint)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            raise EpochfsError("%s: daemon not responding (%s: %s)" % (mountpoint, path, e.strerror or e)) from None

    def close(self):
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, request):
        """Sends one request (a dict) and returns the reply (a dict).

        Raises EpochfsError on {"ok": false} (with the daemon's "error" as message), on an
        over-cap request, and on a connection that fails or times out.
        """
        return self._call_raw(_encode(request))

    def _call_raw(self, payload):
        if len(payload) > MAX_MESSAGE_BYTES:
            raise EpochfsError("message of %d bytes is over the %d-byte cap" % (len(payload), MAX_MESSAGE_BYTES))
        try:
            self._sock.sendall(struct.pack("<I", len(payload)) + payload)
            (n,) = struct.unpack("<I", self._recv_exact(4))
            if n > MAX_MESSAGE_BYTES:
                raise EpochfsError("reply of %d bytes is over the %d-byte cap" % (n, MAX_MESSAGE_BYTES))
            raw = self._recv_exact(n)
        except OSError as e:  # includes socket.timeout
            raise EpochfsError("%s: daemon not responding (%s)" % (self.mountpoint, e)) from None
        try:
            reply = json.loads(raw.decode("utf-8"))
        except ValueError:
            raise EpochfsError("malformed reply from daemon") from None
        if not isinstance(reply, dict):
            raise EpochfsError("malformed reply from daemon")
        if not reply.get("ok", False):
            raise EpochfsError(str(reply.get("error", "failed")), reply.get("code"))
        return reply

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise EpochfsError("%s: daemon closed the connection" % (self.mountpoint,))
            buf += chunk
        return bytes(buf)


def _entry_json(path):
    """One order entry as JSON bytes: a string, or {"b64": ...} for a name that is not UTF-8.

    ``path`` is str (possibly with surrogate escapes, as os.fsdecode makes for undecodable
    bytes), bytes or os.PathLike, relative to the mount.
    """
    path = os.fspath(path)
    if isinstance(path, str):
        try:
            path.encode("utf-8")  # strict: lone surrogates fail
            text = path
        except UnicodeEncodeError:
            text = None
            raw = os.fsencode(path)
    else:
        raw = bytes(path)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if text is not None:
        return json.dumps(text, ensure_ascii=False).encode("utf-8")
    return b'{"b64":"' + base64.b64encode(raw) + b'"}'


def _append_payloads(paths):
    """Yields order_append payloads, each at most MAX_MESSAGE_BYTES, in order."""
    budget = MAX_MESSAGE_BYTES - len(_APPEND_HEAD) - len(_APPEND_TAIL)
    batch, size = [], 0
    for p in paths:
        e = _entry_json(p)
        if len(e) > budget:
            raise EpochfsError("order entry of %d bytes does not fit in one message" % len(e))
        extra = len(e) + (1 if batch else 0)  # the separating comma
        if size + extra > budget:
            yield _APPEND_HEAD + b",".join(batch) + _APPEND_TAIL
            batch, size, extra = [], 0, len(e)
        batch.append(e)
        size += extra
    if batch:
        yield _APPEND_HEAD + b",".join(batch) + _APPEND_TAIL


def register_order(mountpoint, paths, epoch, rank=0, start=0, timeout=DEFAULT_TIMEOUT_S):
    """Tells the mount the order in which this rank will read ``paths`` this epoch.

    ``paths`` (an iterable of str, bytes or os.PathLike, relative to the mount) is streamed over
    one connection: order_begin {epoch, rank, start}, order_append batches (each message within
    the 64 KiB cap), order_commit. ``start`` is the position in the order the first path has
    (non-zero when resuming mid-epoch). Returns the commit reply (it carries "entries").
    Raises EpochfsError on any failure (the connection then closes before order_commit, so
    the partial plan is never committed).
    """
    with AdminClient(mountpoint, timeout=timeout) as client:
        client.call({"cmd": CMD_ORDER_BEGIN, "epoch": int(epoch), "rank": int(rank), "start": int(start)})
        for payload in _append_payloads(paths):
            client._call_raw(payload)
        return client.call({"cmd": CMD_ORDER_COMMIT})


def clear_order(mountpoint, timeout=DEFAULT_TIMEOUT_S):
    """Forgets the registered order (the mount falls back to order-blind caching)."""
    with AdminClient(mountpoint, timeout=timeout) as client:
        return client.call({"cmd": CMD_ORDER_CLEAR})


def placement(mountpoint, timeout=DEFAULT_TIMEOUT_S):
    """The mount's placement map: (version, {path relative to the mount: owner node id}).

    The daemon pages the map under the message cap; the owner is the first live rendezvous
    owner (-1: no live owner). `version` names the live member set, so ranks can check they
    all use the same map for an epoch.
    """
    owners = {}
    with AdminClient(mountpoint, timeout=timeout) as client:
        start, version = 0, None
        while True:
            reply = client.call({"cmd": CMD_PLACEMENT, "start": start, "count": 100000})
            if version is None:
                version = reply["version"]
            elif reply["version"] != version:
                version, owners, start = reply["version"], {}, 0  # membership changed: restart
                continue
            for path, owner in reply["entries"]:
                if isinstance(path, dict):
                    path = os.fsdecode(base64.b64decode(path["b64"]))
                owners[path] = owner
            start += len(reply["entries"])
            if not reply["entries"] or start >= reply["total"]:
                return version, owners

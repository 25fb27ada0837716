#!/usr/bin/python3
"""fault_proxy: a TCP proxy in front of rgw that injects network and S3 faults (a test tool).

    proxy = FaultProxy(("127.0.0.1", rgw_port)).start()   # listens on 127.0.0.1:proxy.port
    proxy.set_mode("slowdown", count=3)                    # the next 3 requests: 503 SlowDown
    ... epochfs --s3-endpoint proxy.endpoint ...
    proxy.stats()   # {"connections", "requests", "forwarded", "faults", "faults_by_mode"}
    proxy.stop()

Modes, switched at runtime by set_mode(mode, count=None, seconds=None, after_bytes=0); a mode
with a `count` or `seconds` goes back to `pass` when used up or expired:

- `pass`: every request is forwarded and its response relayed;
- `reset`: each new connection is accepted, then closed with a TCP RST (SO_LINGER 0); `count`
  connections;
- `reset_request`: each request, on a new or a kept-alive connection, is read and answered with
  a TCP RST (what a client holding its connections open meets); `count` requests;
- `drop`: each new connection is accepted and never answered (held open until the mode changes
  or stop()); `count` connections;
- `stall_after_bytes`: each request is forwarded, its response relayed for `after_bytes` bytes
  (status line and headers included), then nothing more: the connection is held until the client
  closes it, the mode changes or stop(); `count` requests;
- `slowdown`: each request is answered by the proxy with HTTP 503 and an S3 error body
  Code=SlowDown, the connection kept alive; `count` requests or `seconds`;
- `expired_token`: the next request is answered with HTTP 403 Code=ExpiredToken (count 1 unless
  given).

The per-request modes need HTTP/1.1 request framing: requests are parsed (request line, headers,
a body by Content-Length or chunked; `Expect: 100-continue` is answered by the proxy itself and
not forwarded), forwarded one at a time over one upstream connection per client connection, and
responses relayed as they arrive (a body by Content-Length, chunked, or until close; none for
HEAD, 1xx, 204, 304). Standard library only; one thread per client connection.

CLI (manual use): `fault_proxy.py --upstream 127.0.0.1:PORT [--port P]`, then commands on
stdin: `pass`, `reset [N]`, `reset_request [N]`, `drop [N]`, `stall_after_bytes K [N]`,
`slowdown [N] [--seconds T]`, `expired_token`, `stats`, `quit`.
"""

import argparse
import json
import socket
import struct
import sys
import threading
import time

MODES = ("pass", "reset", "reset_request", "drop", "stall_after_bytes", "slowdown",
         "expired_token")
PER_REQUEST = ("reset_request", "slowdown", "expired_token", "stall_after_bytes")
PER_CONNECTION = ("reset", "drop")
MAX_HEADER = 64 * 1024
PIECE = 256 * 1024
ERROR_BODY = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
              '<RequestId>fault-proxy-%d</RequestId></Error>')
FAULT_ANSWERS = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "expired_token": (403, "Forbidden", "ExpiredToken",
                      "The provided token has expired."),
}


class ProtocolError(Exception):
    pass


class Closed(Exception):
    """The peer closed the connection (between messages or in the middle of one)."""


class Reader:
    """Buffered reads from a socket: lines, exact byte counts, what is there."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        b = self.sock.recv(PIECE)
        if not b:
            raise Closed()
        self.buf += b

    def head(self):
        """The bytes up to and including the blank line that ends a message's head."""
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                out = bytes(self.buf[:i + 4])
                del self.buf[:i + 4]
                return out
            if len(self.buf) > MAX_HEADER:
                raise ProtocolError("header over %d bytes" % MAX_HEADER)
            self._fill()

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out = bytes(self.buf[:i + 2])
                del self.buf[:i + 2]
                return out
            self._fill()

    def some(self, limit):
        """Up to `limit` bytes (at least one)."""
        if not self.buf:
            self._fill()
        out = bytes(self.buf[:limit])
        del self.buf[:limit]
        return out


def parse_head(head):
    """(first line as str, {lower-case name: value}) of a request or response head."""
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for ln in lines[1:]:
        if not ln:
            continue
        name, sep, value = ln.partition(":")
        if not sep:
            raise ProtocolError("bad header line %r" % ln)
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def body_parts(reader, headers, until_close):
    """Yields a message body's raw bytes as they arrive (chunked framing included, relayed as
    is): by Transfer-Encoding chunked, Content-Length, or (`until_close`) until the peer closes."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = reader.line()
            yield size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    ln = reader.line()
                    yield ln
                    if ln == b"\r\n":
                        return
            left = size + 2  # the chunk and its CRLF
            while left:
                b = reader.some(min(left, PIECE))
                left -= len(b)
                yield b
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left:
            b = reader.some(min(left, PIECE))
            left -= len(b)
            yield b
    elif until_close:
        while True:
            try:
                yield reader.some(PIECE)
            except Closed:
                return


def rst_close(sock):
    """Closes with a TCP RST instead of a FIN: SO_LINGER on, timeout 0."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class FaultProxy:
    """The proxy; see the module's comment. Thread-safe: set_mode() and stats() from any
    thread, while the accept thread and one thread per connection serve."""

    def __init__(self, upstream, host="127.0.0.1", port=0, log=None):
        self.upstream = upstream
        self.log = log
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.stopping = False
        self.mode, self.count, self.until, self.after_bytes = "pass", None, None, 0
        self.generation = 0  # bumps on each set_mode and stop(): held connections are let go
        self.counts = {"connections": 0, "requests": 0, "forwarded": 0, "faults": 0}
        self.faults_by_mode = {m: 0 for m in MODES if m != "pass"}
        self.held = set()
        self.threads = []
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.endpoint = "http://%s:%d" % (host, self.port)
        self.accept_thread = threading.Thread(target=self._accept_loop, name="fault-proxy",
                                              daemon=True)

    def start(self):
        self.accept_thread.start()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- control -------------------------------------------------------------------------
    def set_mode(self, mode, count=None, seconds=None, after_bytes=0):
        if mode not in MODES:
            raise ValueError("mode %r: one of %s" % (mode, ", ".join(MODES)))
        if mode == "expired_token" and count is None and seconds is None:
            count = 1
        with self.lock:
            self.mode, self.count, self.after_bytes = mode, count, after_bytes
            self.until = time.monotonic() + seconds if seconds is not None else None
            self.generation += 1
            self.changed.notify_all()
        self._say("mode %s count %s seconds %s after_bytes %d" % (mode, count, seconds,
                                                                   after_bytes))

    def stats(self):
        with self.lock:
            out = dict(self.counts)
            out["faults_by_mode"] = dict(self.faults_by_mode)
            out["mode"] = self._current_locked()
            out["held"] = len(self.held)
            return out

    def stop(self):
        with self.lock:
            self.stopping = True
            self.generation += 1
            self.changed.notify_all()
        try:
            self.listener.close()
        except OSError:
            pass
        try:  # wakes accept()
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            pass
        if self.accept_thread.is_alive():
            self.accept_thread.join(5)
        for t in list(self.threads):
            t.join(5)

    # ---- the modes -----------------------------------------------------------------------
    def _current_locked(self):
        if self.mode != "pass" and self.until is not None and time.monotonic() >= self.until:
            self.mode, self.count, self.until = "pass", None, None
        return self.mode

    def _take(self, kinds):
        """The current mode if it is one of `kinds` (one of its uses consumed), else None."""
        with self.lock:
            mode = self._current_locked()
            if mode not in kinds:
                return None, 0
            after = self.after_bytes
            if self.count is not None:
                self.count -= 1
                if self.count <= 0:
                    self.mode, self.count, self.until = "pass", None, None
            self.counts["faults"] += 1
            self.faults_by_mode[mode] += 1
            return mode, after

    def _count(self, name):
        with self.lock:
            self.counts[name] += 1

    def _say(self, msg):
        if self.log:
            self.log("fault_proxy: " + msg)

    # ---- serving -------------------------------------------------------------------------
    def _accept_loop(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.stopping:
                    client.close()
                    return
                self.counts["connections"] += 1
                self.threads = [t for t in self.threads if t.is_alive()]
            mode, _ = self._take(PER_CONNECTION)
            if mode == "reset":
                rst_close(client)
                continue
            t = threading.Thread(target=self._serve, args=(client, mode), daemon=True,
                                 name="fault-proxy-conn")
            with self.lock:
                self.threads.append(t)
            t.start()

    def _hold(self, sock, watch_client=None):
        """Keeps `sock` open, answering nothing, until the mode changes, stop(), or (with
        `watch_client`) the client closes."""
        import select
        with self.lock:
            self.held.add(sock)
            gen = self.generation
        try:
            while True:
                with self.lock:
                    if self.stopping or self.generation != gen:
                        return
                    self.changed.wait(0.2)
                if watch_client is not None:
                    r, _, _ = select.select([watch_client], [], [], 0)
                    if r:
                        try:
                            if not watch_client.recv(PIECE, socket.MSG_PEEK):
                                return
                        except OSError:
                            return
        finally:
            with self.lock:
                self.held.discard(sock)

    def _serve(self, client, mode):
        upstream = None
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if mode == "drop":
                self._hold(client, watch_client=client)
                return
            creader = Reader(client)
            while True:
                try:
                    head = creader.head()
                except Closed:
                    return
                self._count("requests")
                line, headers = parse_head(head)
                method = line.split(" ", 1)[0].upper()
                if headers.get("expect", "").lower() == "100-continue":
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"".join(ln + b"\r\n" for ln in head.split(b"\r\n")[:-2]
                                    if not ln.lower().startswith(b"expect:")) + b"\r\n"
                body = b"".join(body_parts(creader, headers, until_close=False))
                fault, after = self._take(PER_REQUEST)
                if fault == "reset_request":
                    rst_close(client)
                    return
                client_close = headers.get("connection", "").lower() == "close"
                if fault in FAULT_ANSWERS:
                    self._answer(client, fault, method, client_close)
                    if client_close:
                        return
                    continue
                if upstream is None:
                    upstream = socket.create_connection(self.upstream, timeout=None)
                    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    ureader = Reader(upstream)
                upstream.sendall(head + body)
                self._count("forwarded")
                keep = self._relay(ureader, client, method,
                                   after if fault == "stall_after_bytes" else None)
                if not keep or client_close:
                    return
        except (OSError, Closed, ProtocolError, ValueError) as e:
            self._say("connection ended: %s" % e)
        finally:
            if upstream is not None:
                upstream.close()
            client.close()

    def _answer(self, client, fault, method, close):
        status, reason, code, message = FAULT_ANSWERS[fault]
        body = (ERROR_BODY % (code, message, self.stats()["requests"])).encode()
        head = ("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
                "x-amz-request-id: fault-proxy\r\nConnection: %s\r\n\r\n"
                % (status, reason, len(body), "close" if close else "keep-alive")).encode()
        client.sendall(head if method == "HEAD" else head + body)

    def _relay(self, ureader, client, method, stall_after):
        """Relays one response (and any 1xx before it) from upstream to the client; with
        `stall_after`, only that many bytes, then holds. Returns whether the connection can
        carry another request."""
        sent = 0

        def send(b):
            nonlocal sent
            if stall_after is not None and sent + len(b) > stall_after:
                client.sendall(b[:max(0, stall_after - sent)])
                sent = stall_after
                return False
            client.sendall(b)
            sent += len(b)
            return True

        while True:
            head = ureader.head()
            status_line, headers = parse_head(head)
            parts = status_line.split(" ", 2)
            if len(parts) < 2 or not parts[1].isdigit():
                raise ProtocolError("bad status line %r" % status_line)
            status = int(parts[1])
            if not send(head):
                self._hold(client, watch_client=client)
                return False
            if 100 <= status < 200:
                continue
            break
        no_body = method == "HEAD" or status in (204, 304)
        until_close = "content-length" not in headers and \
            "chunked" not in headers.get("transfer-encoding", "").lower()
        if not no_body:
            for b in body_parts(ureader, headers, until_close=True):
                if not send(b):
                    self._hold(client, watch_client=client)
                    return False
        if stall_after is not None:  # the whole response fit in the allowance: hold anyway
            self._hold(client, watch_client=client)
            return False
        if method == "HEAD" and "chunked" in headers.get("transfer-encoding", "").lower():
            # rgw (16.2) answers a HEAD of the service (`HEAD /`) chunked, with a last chunk
            # after the head it should not send: the connection is not reused.
            return False
        return not (until_close and not no_body) and \
            headers.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True, help="HOST:PORT of the server (rgw)")
    ap.add_argument("--port", type=int, default=0, help="port to listen on (default: free)")
    args = ap.parse_args()
    host, _, port = args.upstream.rpartition(":")
    proxy = FaultProxy((host, int(port)), port=args.port,
                       log=lambda m: print(m, file=sys.stderr, flush=True)).start()
    print("listening on %s; commands: pass | reset [N] | reset_request [N] | drop [N] | "
          "stall_after_bytes K [N] | slowdown [N] [--seconds T] | expired_token | stats | quit"
          % proxy.endpoint, flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            cmd, rest = words[0], words[1:]
            try:
                if cmd == "quit":
                    break
                if cmd == "stats":
                    print(json.dumps(proxy.stats()), flush=True)
                elif cmd == "slowdown" and "--seconds" in rest:
                    proxy.set_mode(cmd, seconds=float(rest[rest.index("--seconds") + 1]))
                elif cmd == "stall_after_bytes":
                    proxy.set_mode(cmd, after_bytes=int(rest[0]),
                                   count=int(rest[1]) if len(rest) > 1 else None)
                else:
                    proxy.set_mode(cmd, count=int(rest[0]) if rest else None)
            except (ValueError, IndexError) as e:
                print("error: %s" % e, flush=True)
    except KeyboardInterrupt:
        pass
    proxy.stop()


if __name__ == "__main__":
    main()

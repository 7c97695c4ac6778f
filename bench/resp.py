"""A small RESP client, enough to drive a server from the benchmark (standard library
only).
"""

from __future__ import annotations

import socket


class ReplyError(Exception):
    """An error reply from the server."""


class Client:
    """A minimal RESP2 client: enough for setup, checks and pipelined warm-ups."""

    def __init__(self, port: int, timeout: float = 60.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = self.sock.makefile("rb")

    def close(self) -> None:
        try:
            self.rfile.close()
            self.sock.close()
        except OSError:
            pass

    @staticmethod
    def encode(args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def read(self):
        line = self.rfile.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by the server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rfile.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise ConnectionError(f"unexpected reply {line[:40]!r}")

    def pipeline(self, commands) -> list:
        """Send all commands, then read all replies (errors are returned, not raised)."""
        self.sock.sendall(b"".join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]

    def call(self, *args):
        reply = self.pipeline([args])[0]
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def text(self, *args) -> str:
        reply = self.call(*args)
        return reply.decode() if isinstance(reply, bytes) else str(reply)


"""The blocking client, on http.client (standard library only)."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from typing import Any, Callable, Iterator, Optional

from . import _wire
from ._api import API
from ._wire import Request, Target

USER_AGENT = "hutch-python/0.1"


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the daemon's unix socket."""

    def __init__(self, socket_path: str, timeout: Optional[float]) -> None:
        super().__init__("hutch", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.socket_path)
        self.sock = s


class Client(API):
    """A client of one Hutch daemon. url and api_key default to what the
    CLI uses ($HUTCH_URL, $HUTCH_API_KEY, the local daemon). Calls made one
    after the other share a kept-alive connection; streams get their own.
    Safe to use from several threads."""

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, timeout: Optional[float] = 300) -> None:
        self.target, self.api_key = _wire.defaults(url, api_key)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _connect(self) -> http.client.HTTPConnection:
        t: Target = self.target
        if t.scheme == "unix":
            return _UnixConnection(t.socket, self.timeout)
        if t.scheme == "https":
            return http.client.HTTPSConnection(t.host, t.port, timeout=self.timeout, context=ssl.create_default_context())
        return http.client.HTTPConnection(t.host, t.port, timeout=self.timeout)

    def _send(self, conn: http.client.HTTPConnection, req: Request) -> http.client.HTTPResponse:
        body, ctype = req.payload()
        conn.request(req.method, req.target(self.target.base_path), body=body or None,
                     headers=_wire.headers(self.target, self.api_key, req, body, ctype, USER_AGENT))
        return conn.getresponse()

    def _call(self, req: Request) -> Any:
        with self._lock:
            reused = self._conn is not None
            conn = self._conn or self._connect()
            self._conn = None
            try:
                res = self._send(conn, req)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not reused:
                    raise
                # The daemon closed the kept-alive connection while it idled:
                # the request never reached it; send it on a new one.
                conn = self._connect()
                res = self._send(conn, req)
            except BaseException:
                conn.close()
                raise
            try:
                data = res.read()
            except BaseException:
                conn.close()
                raise
            if res.will_close:
                conn.close()
            else:
                self._conn = conn
        _wire.check(res.status, data)
        return _wire.decode(req, data)

    def _stream(self, req: Request, parse: Callable[[str, str], Any]) -> Iterator[Any]:
        conn = self._connect()
        try:
            res = self._send(conn, req)
            if res.status >= 300 or not res.getheader("Content-Type", "").startswith("text/event-stream"):
                _wire.check(res.status, res.read())
                # A JSON answer where a stream was asked for: nothing to yield.
                return
            for event, data in _wire.events(line.decode("utf-8", "replace") for line in res):
                v = parse(event, data)
                if v is not None:
                    yield v
        finally:
            conn.close()

"""The asyncio client: the same calls as Client, awaited, on asyncio's
streams (HTTP/1.1 written by hand; standard library only)."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, AsyncIterator, Callable, Optional

from . import _wire
from ._api import API
from ._wire import Request

USER_AGENT = "hutch-python-asyncio/0.1"
_MAX_LINE = 64 << 10


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        self.writer.close()


class _Response:
    """An answer's status and headers; its body is read with body() or
    chunks()."""

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str], method: str) -> None:
        self.conn, self.status, self.headers, self.method = conn, status, headers, method

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    async def chunks(self) -> AsyncIterator[bytes]:
        r = self.conn.reader
        if self.method == "HEAD" or self.status in (204, 304):
            return
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await r.readline()
                if not size_line:
                    raise ConnectionError("the daemon closed the connection in a chunked body")
                size = int(size_line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while (await r.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                yield await r.readexactly(size)
                await r.readexactly(2)
        elif "content-length" in self.headers:
            n = int(self.headers["content-length"])
            if n:
                yield await r.readexactly(n)
        else:
            while data := await r.read(1 << 16):
                yield data
            self.headers["connection"] = "close"

    async def body(self) -> bytes:
        return b"".join([c async for c in self.chunks()])

    async def lines(self) -> AsyncIterator[str]:
        buf = b""
        async for c in self.chunks():
            buf += c
            while (i := buf.find(b"\n")) >= 0:
                line, buf = buf[: i + 1], buf[i + 1:]
                yield line.decode("utf-8", "replace")
        if buf:
            yield buf.decode("utf-8", "replace")


class AsyncClient(API):
    """The asyncio client of one Hutch daemon: `await client.exec(...)`,
    `async for ev in client.exec_stream(...)`. Calls made one after the
    other reuse kept-alive connections; streams get their own."""

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, timeout: Optional[float] = 300) -> None:
        self.target, self.api_key = _wire.defaults(url, api_key)
        self.timeout = timeout
        self._idle: list[_Conn] = []

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
            try:
                await c.writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _connect(self) -> _Conn:
        t = self.target
        if t.scheme == "unix":
            r, w = await asyncio.open_unix_connection(t.socket, limit=_MAX_LINE)
        else:
            tls = ssl.create_default_context() if t.scheme == "https" else None
            r, w = await asyncio.open_connection(t.host, t.port, ssl=tls, limit=_MAX_LINE)
        return _Conn(r, w)

    async def _send(self, conn: _Conn, req: Request) -> _Response:
        body, ctype = req.payload()
        head = [f"{req.method} {req.target(self.target.base_path)} HTTP/1.1"]
        head += [f"{k}: {v}" for k, v in _wire.headers(self.target, self.api_key, req, body, ctype, USER_AGENT).items()]
        conn.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await conn.writer.drain()
        status_line = await conn.reader.readline()
        if not status_line:
            raise ConnectionResetError("the daemon closed the connection")
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ConnectionError(f"not an HTTP answer: {status_line!r}")
        headers: dict[str, str] = {}
        while True:
            line = await conn.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return _Response(conn, int(parts[1]), headers, req.method)

    async def _exchange(self, req: Request) -> tuple[int, bytes]:
        reused = bool(self._idle)
        conn = self._idle.pop() if reused else await self._connect()
        try:
            try:
                res = await self._send(conn, req)
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError):
                conn.close()
                if not reused:
                    raise
                # A kept-alive connection the daemon closed while it idled.
                conn = await self._connect()
                res = await self._send(conn, req)
            data = await res.body()
        except BaseException:
            conn.close()
            raise
        if res.keep_alive:
            self._idle.append(conn)
        else:
            conn.close()
        return res.status, data

    async def _call_async(self, req: Request) -> Any:
        status, data = await asyncio.wait_for(self._exchange(req), self.timeout)
        _wire.check(status, data)
        return _wire.decode(req, data)

    def _call(self, req: Request) -> Any:
        return self._call_async(req)

    async def _stream(self, req: Request, parse: Callable[[str, str], Any]) -> AsyncIterator[Any]:
        conn = await self._connect()
        try:
            res = await self._send(conn, req)
            if res.status >= 300 or not res.headers.get("content-type", "").startswith("text/event-stream"):
                _wire.check(res.status, await res.body())
                return
            p = _wire.SSEParser()
            async for line in res.lines():
                ev = p.feed(line)
                if ev is not None:
                    v = parse(*ev)
                    if v is not None:
                        yield v
        finally:
            conn.close()

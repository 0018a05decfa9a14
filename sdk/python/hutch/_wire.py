"""What goes on the wire, shared by the blocking and the asyncio client.

A call is described once as a Request; each transport sends it its own way
and reads the answer: JSON, bytes, or a stream of Server-Sent Events.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from .errors import HutchError

DEFAULT_SOCKET = "/run/hutch/hutch.sock"
DEFAULT_URL = "http://127.0.0.1:7070"
DEFAULT_KEY_FILE = "/var/lib/hutch/api.key"


@dataclass
class Target:
    """Where the daemon listens: a TCP host and port, or a unix socket."""

    scheme: str  # "http", "https" or "unix"
    host: str = ""
    port: int = 0
    socket: str = ""
    base_path: str = ""

    @property
    def host_header(self) -> str:
        if self.scheme == "unix":
            return "hutch"
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


def parse_url(url: str) -> Target:
    """Reads http://host:port[/prefix], https://… or unix:/path/to.sock."""
    if url.startswith("unix:"):
        path = url[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        return Target(scheme="unix", socket=path)
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"the daemon's URL must be http://host:port, https://… or unix:/path, not {url!r}")
    port = u.port or (443 if u.scheme == "https" else 80)
    return Target(scheme=u.scheme, host=u.hostname, port=port, base_path=u.path.rstrip("/"))


def defaults(url: Optional[str], api_key: Optional[str]) -> tuple[Target, Optional[str]]:
    """The daemon and key the CLI would use: $HUTCH_URL and $HUTCH_API_KEY,
    else the local daemon's unix socket (which needs no key), else
    127.0.0.1:7070 with the key in /var/lib/hutch/api.key."""
    url = url or os.environ.get("HUTCH_URL")
    api_key = api_key or os.environ.get("HUTCH_API_KEY")
    if not url:
        if os.path.exists(DEFAULT_SOCKET) and os.access(DEFAULT_SOCKET, os.W_OK):
            url = "unix:" + DEFAULT_SOCKET
        else:
            url = DEFAULT_URL
    target = parse_url(url)
    if api_key is None and target.scheme != "unix":
        try:
            with open(DEFAULT_KEY_FILE, encoding="utf-8") as f:
                api_key = f.read().strip() or None
        except OSError:
            pass
    return target, api_key


@dataclass
class Request:
    """One call to the API. body is JSON when it is not bytes."""

    method: str
    path: str
    query: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    accept: str = "application/json"
    content_type: str = ""
    # parse turns the answer's decoded JSON (or bytes, with raw) into what
    # the method returns.
    parse: Callable[[Any], Any] = lambda v: v
    raw: bool = False

    def target(self, base_path: str) -> str:
        q = {k: v for k, v in self.query.items() if v is not None and v is not False}
        for k, v in q.items():
            if v is True:
                q[k] = "true"
        qs = urllib.parse.urlencode(q, doseq=True)
        return base_path + self.path + ("?" + qs if qs else "")

    def payload(self) -> tuple[bytes, str]:
        if self.body is None:
            return b"", ""
        if isinstance(self.body, (bytes, bytearray)):
            return bytes(self.body), self.content_type or "application/octet-stream"
        return json.dumps(self.body).encode(), "application/json"


def headers(target: Target, api_key: Optional[str], req: Request, body: bytes, ctype: str, user_agent: str) -> dict[str, str]:
    h = {"Host": target.host_header, "Accept": req.accept, "User-Agent": user_agent}
    if api_key:
        h["Authorization"] = "Bearer " + api_key
    if body or req.method in ("POST", "PUT", "PATCH"):
        h["Content-Length"] = str(len(body))
    if ctype:
        h["Content-Type"] = ctype
    return h


def check(status: int, body: bytes) -> None:
    """Raises the API's error for an answer that is not a success."""
    if 200 <= status < 300:
        return
    code, message = "internal", body.decode("utf-8", "replace").strip() or f"HTTP {status}"
    try:
        err = json.loads(body)["error"]
        code, message = err.get("code", code), err.get("message", message)
    except (ValueError, KeyError, TypeError):
        pass
    raise HutchError(code, message, status)


def decode(req: Request, body: bytes) -> Any:
    if req.raw:
        return req.parse(body)
    return req.parse(json.loads(body) if body.strip() else None)


def path(*parts: str) -> str:
    """The URL path of the API's parts, each escaped."""
    return "/v1/" + "/".join(urllib.parse.quote(p, safe="") for p in parts)


class SSEParser:
    """Turns the lines of a text/event-stream into (event, data) pairs."""

    def __init__(self) -> None:
        self.event = ""
        self.data: list[str] = []

    def feed(self, line: str) -> Optional[tuple[str, str]]:
        line = line.rstrip("\r\n")
        if line == "":
            if not self.data and not self.event:
                return None
            out = (self.event or "message", "\n".join(self.data))
            self.event, self.data = "", []
            return out
        if line.startswith(":"):
            return None  # a comment: a keep-alive
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        return None


def events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    p = SSEParser()
    for line in lines:
        ev = p.feed(line)
        if ev is not None:
            yield ev

"""The API's calls, written once for both clients.

Every method builds a Request and hands it to the client's _call (one
answer) or _stream (Server-Sent Events). The blocking client's _call
returns the result; the asyncio client's returns a coroutine to await, and
its _stream an async iterator. So `client.exec(...)` is the same line in
both, with an `await` in front under asyncio.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional, Union

from ._wire import Request, path
from .errors import HutchError


@dataclass
class ExecResult:
    """A command's end, with its output when it ran without streaming."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    timed_out: bool = False
    truncated: bool = False
    killed_by: str = ""

    @classmethod
    def from_json(cls, v: dict) -> "ExecResult":
        return cls(**{k: v[k] for k in cls.__dataclass_fields__ if k in v})


@dataclass
class ExecEvent:
    """One event of a streamed command: output on "stdout" or "stderr"
    (data, as bytes), then its "exit" (result); a process's logs end with
    "end" instead."""

    kind: str
    data: bytes = b""
    result: Optional[ExecResult] = None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def _exec_event(event: str, data: str) -> Optional[ExecEvent]:
    if event in ("stdout", "stderr"):
        v = json.loads(data)
        raw = base64.b64decode(v["data_base64"]) if "data_base64" in v else v.get("data", "").encode()
        return ExecEvent(event, raw)
    if event == "exit":
        return ExecEvent("exit", result=ExecResult.from_json(json.loads(data)))
    if event == "end":
        return ExecEvent("end")  # the end of a process's logs
    if event == "error":
        err = json.loads(data).get("error", {})
        raise HutchError(err.get("code", "internal"), err.get("message", data))
    return None  # reserved event names are skipped


def _fields(**kw: Any) -> dict:
    """A JSON body of the fields given, without those left at None."""
    return {k: v for k, v in kw.items() if v is not None}


def _command(cmd: Union[str, list[str], None]) -> dict:
    """cmd as a list runs that program with those arguments; as a string,
    through `sh -c` (the API's command)."""
    if cmd is None:
        return {}
    if isinstance(cmd, str):
        return {"command": cmd}
    return {"cmd": list(cmd)}


class Sandbox:
    """A sandbox: its id, its record as last read (info), and the calls on
    it. Under the asyncio client each call is awaited."""

    def __init__(self, client: "API", info: dict) -> None:
        self.client = client
        self.info = info
        self.id: str = info["id"]

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r}, state={self.info.get('state')!r})"

    def exec(self, cmd: Union[str, list[str]], **kw: Any):
        return self.client.exec(self.id, cmd, **kw)

    def exec_stream(self, cmd: Union[str, list[str]], **kw: Any):
        return self.client.exec_stream(self.id, cmd, **kw)

    def run_code(self, code: str, language: str = "python", **kw: Any):
        return self.client.run_code(self.id, code, language, **kw)

    def read_file(self, file: str, **kw: Any):
        return self.client.read_file(self.id, file, **kw)

    def write_file(self, file: str, data: Union[bytes, str], **kw: Any):
        return self.client.write_file(self.id, file, data, **kw)

    def list_files(self, directory: str = ".", depth: int = 1, **kw: Any):
        return self.client.list_files(self.id, directory, depth, **kw)

    def start_process(self, cmd: Union[str, list[str]], **kw: Any):
        return self.client.start_process(self.id, cmd, **kw)

    def start_service(self, cmd: Union[str, list[str]], port: int, **kw: Any):
        return self.client.start_service(self.id, cmd, port, **kw)

    def run_tool(self, name: str, args: dict, **kw: Any):
        return self.client.run_tool(self.id, name, args, **kw)

    def checkpoint(self, name: Optional[str] = None, memory: bool = False):
        return self.client.checkpoint(self.id, name, memory)

    def checkpoints(self):
        return self.client.checkpoints(self.id)

    def checkpoint_diff(self, checkpoint: str, file: Optional[str] = None):
        return self.client.checkpoint_diff(self.id, checkpoint, file)

    def rollback(self, checkpoint: str, memory: bool = False):
        return self.client.rollback(self.id, checkpoint, memory)

    def fork(self, count: int = 1):
        return self.client.fork(self.id, count)

    def start_desktop(self, width: Optional[int] = None, height: Optional[int] = None):
        return self.client.start_desktop(self.id, width, height)

    def desktop_screenshot(self, **kw: Any):
        return self.client.desktop_screenshot(self.id, **kw)

    def desktop_actions(self, actions: list, **kw: Any):
        return self.client.desktop_actions(self.id, actions, **kw)

    def desktop_stream(self, control: bool = False):
        return self.client.desktop_stream(self.id, control)

    def delete(self, wait: bool = False):
        return self.client.delete_sandbox(self.id, wait=wait)


class API:
    """The calls of Hutch's REST API (api/openapi.yaml)."""

    def _call(self, req: Request) -> Any:
        raise NotImplementedError

    def _stream(self, req: Request, parse) -> Any:
        raise NotImplementedError

    def _sandbox(self, info: dict) -> Sandbox:
        return Sandbox(self, info)

    # The daemon.

    def health(self):
        """The daemon's version, runtimes, pools and default runtime."""
        return self._call(Request("GET", path("health")))

    def whoami(self):
        """Who the daemon takes this client's key for (admin or a key, its
        workspace and modes), and the defaults of what it makes."""
        return self._call(Request("GET", path("whoami")))

    # Sandboxes.

    def create_sandbox(self, template: Optional[str] = None, runtime: Optional[str] = None, **fields: Any):
        """Creates a sandbox and returns it running. fields are the API's
        (cpus, memory_mb, env, idle_timeout_s, network, key, files, …)."""
        body = _fields(template=template, runtime=runtime, **fields)
        return self._call(Request("POST", path("sandboxes"), body=body, parse=self._sandbox))

    def list_sandboxes(self):
        return self._call(Request("GET", path("sandboxes"), parse=lambda v: [self._sandbox(s) for s in v["sandboxes"]]))

    def get_sandbox(self, sandbox_id: str):
        return self._call(Request("GET", path("sandboxes", sandbox_id), parse=self._sandbox))

    def delete_sandbox(self, sandbox_id: str, wait: bool = False):
        """Deletes a sandbox; with wait, answers once it is torn down."""
        return self._call(Request("DELETE", path("sandboxes", sandbox_id), query={"wait": wait}, parse=lambda _: None))

    def _action(self, sandbox_id: str, action: str):
        return self._call(Request("POST", path("sandboxes", sandbox_id, action), parse=self._sandbox))

    def pause(self, sandbox_id: str):
        return self._action(sandbox_id, "pause")

    def unpause(self, sandbox_id: str):
        return self._action(sandbox_id, "unpause")

    def suspend(self, sandbox_id: str):
        return self._action(sandbox_id, "suspend")

    def resume(self, sandbox_id: str):
        return self._action(sandbox_id, "resume")

    def stop(self, sandbox_id: str):
        return self._action(sandbox_id, "stop")

    def start(self, sandbox_id: str):
        return self._action(sandbox_id, "start")

    def keepalive(self, sandbox_id: str, idle_timeout_s: Optional[int] = None, max_lifetime_s: Optional[int] = None, **fields: Any):
        """Sets a sandbox's idle timeout or lifetime from now (PATCH)."""
        body = _fields(idle_timeout_s=idle_timeout_s, max_lifetime_s=max_lifetime_s, **fields)
        return self._call(Request("PATCH", path("sandboxes", sandbox_id), body=body, parse=self._sandbox))

    def stats(self, sandbox_id: str):
        return self._call(Request("GET", path("sandboxes", sandbox_id, "stats")))

    def metrics(self, sandbox_id: str, since: Optional[datetime] = None):
        """What a sandbox used over time: {interval_s, samples}, its samples
        taken after since (all it keeps without), oldest first. A naive
        since is local time."""
        query = {"since": since.astimezone(timezone.utc).isoformat() if since is not None else None}
        return self._call(Request("GET", path("sandboxes", sandbox_id, "metrics"), query=query))

    # Checkpoints and forks.

    def checkpoint(self, sandbox_id: str, name: Optional[str] = None, memory: bool = False):
        """Records the sandbox's files as they are (with memory, under gVisor,
        its memory and processes too) while it runs on: {id, name, ...}."""
        body = _fields(name=name, memory=memory or None)
        return self._call(Request("POST", path("sandboxes", sandbox_id, "checkpoints"), body=body))

    def checkpoints(self, sandbox_id: str):
        """The sandbox's checkpoints, oldest first."""
        return self._call(Request("GET", path("sandboxes", sandbox_id, "checkpoints"),
                                  parse=lambda v: v["checkpoints"]))

    def checkpoint_diff(self, sandbox_id: str, checkpoint: str, file: Optional[str] = None):
        """What changed since a checkpoint: {changes: [{path, kind, type}]};
        with file, that file's unified diff ({unified})."""
        return self._call(Request("GET", path("sandboxes", sandbox_id, "checkpoints", checkpoint, "diff"),
                                  query={"path": file}))

    def rollback(self, sandbox_id: str, checkpoint: str, memory: bool = False):
        """Brings the sandbox's files (with memory, its memory and processes)
        back to a checkpoint; a running sandbox restarts for it."""
        body = _fields(memory=memory or None)
        return self._call(Request("POST", path("sandboxes", sandbox_id, "checkpoints", checkpoint, "rollback"),
                                  body=body, parse=self._sandbox))

    def delete_checkpoint(self, sandbox_id: str, checkpoint: str):
        return self._call(Request("DELETE", path("sandboxes", sandbox_id, "checkpoints", checkpoint), parse=lambda _: None))

    def fork(self, sandbox_id: str, count: int = 1):
        """Makes count copies of the sandbox as it is now (at most 100):
        {sandboxes, errors}, a copy that failed in errors with its number."""
        return self._call(Request("POST", path("sandboxes", sandbox_id, "fork"), body={"count": count}))

    # A sandbox's desktop (template desktop).

    def start_desktop(self, sandbox_id: str, width: Optional[int] = None, height: Optional[int] = None):
        """Starts the desktop at a size (default 1024x768) and its live view,
        returning once it shows: {running, width, height, cursor, recent_actions}.
        A running one is left as it is."""
        return self._call(Request("POST", path("sandboxes", sandbox_id, "desktop"), body=_fields(width=width, height=height)))

    def desktop(self, sandbox_id: str):
        """Whether the desktop runs, its size, the pointer, the latest actions."""
        return self._call(Request("GET", path("sandboxes", sandbox_id, "desktop")))

    def stop_desktop(self, sandbox_id: str):
        return self._call(Request("DELETE", path("sandboxes", sandbox_id, "desktop"), parse=lambda _: None))

    def desktop_screenshot(self, sandbox_id: str, region: Optional[dict] = None, scale: Optional[float] = None):
        """A PNG of the screen, as bytes: all of it or region ({x, y, w, h}),
        scaled down by scale (0 < scale <= 1)."""
        query = dict(region or {}, scale=scale)
        return self._call(Request("GET", path("sandboxes", sandbox_id, "desktop", "screenshot"), query=query,
                                  accept="image/png", raw=True))

    def desktop_actions(self, sandbox_id: str, actions: list, screenshot: Union[bool, dict] = False):
        """Does actions in order ({"type": "click", "x": 10, "y": 20}, type,
        key, scroll, drag, wait, ...) and answers when they are done:
        {cursor, screenshot}, the screenshot (PNG bytes, taken after them)
        when asked for (True, or {region, scale})."""
        shot = {} if screenshot is True else (screenshot or None)

        def parse(v: dict) -> dict:
            if v.get("screenshot"):
                v["screenshot"] = base64.b64decode(v["screenshot"])
            return v
        return self._call(Request("POST", path("sandboxes", sandbox_id, "desktop", "actions"),
                                  body=_fields(actions=actions, screenshot=shot), parse=parse))

    def desktop_stream(self, sandbox_id: str, control: bool = False):
        """A link to watch the desktop live in a browser: {url, control,
        expires_at}; view-only unless control."""
        return self._call(Request("POST", path("sandboxes", sandbox_id, "desktop", "stream"), body=_fields(control=control or None)))

    # Commands.

    def exec(self, sandbox_id: str, cmd: Union[str, list[str]], cwd: Optional[str] = None, env: Optional[dict] = None,
             user: Optional[str] = None, stdin: Optional[str] = None, timeout_s: Optional[int] = None):
        """Runs a command to its end: a list is a program and its arguments,
        a string a shell command. A non-zero exit is a result, not an error."""
        body = _fields(cwd=cwd, env=env, user=user, stdin=stdin, timeout_s=timeout_s, **_command(cmd))
        return self._call(Request("POST", path("sandboxes", sandbox_id, "exec"), body=body, parse=ExecResult.from_json))

    def exec_stream(self, sandbox_id: str, cmd: Union[str, list[str]], cwd: Optional[str] = None, env: Optional[dict] = None,
                    user: Optional[str] = None, stdin: Optional[str] = None, timeout_s: Optional[int] = None):
        """Runs a command, yielding its output as it comes (ExecEvent), then
        its exit."""
        body = _fields(cwd=cwd, env=env, user=user, stdin=stdin, timeout_s=timeout_s, **_command(cmd))
        return self._stream(Request("POST", path("sandboxes", sandbox_id, "exec"), body=body, accept="text/event-stream"), _exec_event)

    def run_code(self, sandbox_id: str, code: str, language: str = "python", timeout_s: Optional[int] = None):
        body = _fields(language=language, code=code, timeout_s=timeout_s)
        return self._call(Request("POST", path("sandboxes", sandbox_id, "code"), body=body, parse=ExecResult.from_json))

    # Files (inside the sandbox, through its agent).

    def read_file(self, sandbox_id: str, file: str, user: Optional[str] = None):
        """A file's content, as bytes."""
        return self._call(Request("GET", path("sandboxes", sandbox_id, "files"), query={"path": file, "user": user},
                                  accept="application/octet-stream", raw=True))

    def write_file(self, sandbox_id: str, file: str, data: Union[bytes, str], user: Optional[str] = None):
        """Writes a file (its directories made), and returns its entry."""
        if isinstance(data, str):
            data = data.encode()
        return self._call(Request("PUT", path("sandboxes", sandbox_id, "files"), query={"path": file, "user": user}, body=data))

    def stat_file(self, sandbox_id: str, file: str, user: Optional[str] = None):
        return self._call(Request("GET", path("sandboxes", sandbox_id, "files", "stat"), query={"path": file, "user": user}))

    def list_files(self, sandbox_id: str, directory: str = ".", depth: int = 1, user: Optional[str] = None):
        return self._call(Request("GET", path("sandboxes", sandbox_id, "files", "list"),
                                  query={"path": directory, "depth": depth, "user": user}, parse=lambda v: v["entries"]))

    def make_dir(self, sandbox_id: str, directory: str, user: Optional[str] = None):
        return self._call(Request("POST", path("sandboxes", sandbox_id, "files", "mkdir"), body=_fields(path=directory, user=user)))

    def move_file(self, sandbox_id: str, source: str, destination: str, user: Optional[str] = None):
        body = _fields(source=source, destination=destination, user=user)
        return self._call(Request("POST", path("sandboxes", sandbox_id, "files", "move"), body=body))

    def delete_file(self, sandbox_id: str, file: str, user: Optional[str] = None):
        return self._call(Request("DELETE", path("sandboxes", sandbox_id, "files"), query={"path": file, "user": user},
                                  parse=lambda _: None))

    # Background processes.

    def start_process(self, sandbox_id: str, cmd: Union[str, list[str]], name: Optional[str] = None, cwd: Optional[str] = None,
                      env: Optional[dict] = None, user: Optional[str] = None, port: Optional[int] = None, stdin: bool = False):
        body = _fields(name=name, cwd=cwd, env=env, user=user, port=port, stdin=stdin or None, **_command(cmd))
        return self._call(Request("POST", path("sandboxes", sandbox_id, "processes"), body=body))

    def list_processes(self, sandbox_id: str):
        return self._call(Request("GET", path("sandboxes", sandbox_id, "processes"), parse=lambda v: v["processes"]))

    def process_logs(self, sandbox_id: str, name: str, follow: bool = False):
        """A process's output so far (ExecEvent), and with follow what it
        writes next, until it ends."""
        req = Request("GET", path("sandboxes", sandbox_id, "processes", name, "logs"), query={"follow": follow},
                      accept="text/event-stream")
        return self._stream(req, _exec_event)

    def signal_process(self, sandbox_id: str, name: str, signal: str = "TERM"):
        return self._call(Request("POST", path("sandboxes", sandbox_id, "processes", name, "signal"),
                                  body={"signal": signal}, parse=lambda _: None))

    def send_input(self, sandbox_id: str, name: str, data: Union[bytes, str] = b"", close: bool = False):
        body: dict = {"close": close} if close else {}
        if isinstance(data, str):
            body["data"] = data
        elif data:
            body["data_base64"] = base64.b64encode(data).decode()
        return self._call(Request("POST", path("sandboxes", sandbox_id, "processes", name, "stdin"), body=body,
                                  parse=lambda _: None))

    def delete_process(self, sandbox_id: str, name: str):
        return self._call(Request("DELETE", path("sandboxes", sandbox_id, "processes", name), parse=lambda _: None))

    # Services (web servers with preview URLs).

    def start_service(self, sandbox_id: str, cmd: Union[str, list[str]], port: int, name: Optional[str] = None,
                      cwd: Optional[str] = None, env: Optional[dict] = None, public: bool = False):
        body = _fields(name=name, port=port, cwd=cwd, env=env, public=public or None, **_command(cmd))
        return self._call(Request("POST", path("sandboxes", sandbox_id, "services"), body=body))

    def list_services(self, sandbox_id: str):
        return self._call(Request("GET", path("sandboxes", sandbox_id, "services"), parse=lambda v: v["services"]))

    def get_service(self, sandbox_id: str, name: str):
        return self._call(Request("GET", path("sandboxes", sandbox_id, "services", name)))

    def stop_service(self, sandbox_id: str, name: str):
        return self._call(Request("POST", path("sandboxes", sandbox_id, "services", name, "stop")))

    def restart_service(self, sandbox_id: str, name: str):
        return self._call(Request("POST", path("sandboxes", sandbox_id, "services", name, "restart")))

    def delete_service(self, sandbox_id: str, name: str):
        return self._call(Request("DELETE", path("sandboxes", sandbox_id, "services", name), parse=lambda _: None))

    def service_link(self, sandbox_id: str, name: str, expires_in_s: Optional[int] = None):
        """A link to a service's preview that works without the key until it
        expires: {url, path_url, expires_at}."""
        return self._call(Request("POST", path("sandboxes", sandbox_id, "services", name, "link"),
                                  body=_fields(expires_in_s=expires_in_s)))

    def revoke_service_links(self, sandbox_id: str, name: str):
        """Revokes every link to the service's preview made until now; links
        made later work."""
        return self._call(Request("DELETE", path("sandboxes", sandbox_id, "services", name, "link"), parse=lambda _: None))

    # Tools for LLM agents.

    def list_tools(self, format: str = "anthropic"):
        """The tool catalogue, ready for a model's function calling:
        format "anthropic" (name, description, input_schema) or "openai"
        (type function, with parameters)."""
        return self._call(Request("GET", path("tools"), query={"format": format}, parse=lambda v: v["tools"]))

    def run_tool(self, sandbox_id: str, name: str, args: dict, mode: Optional[str] = None):
        """Runs one tool call in a sandbox: {status, result | error, …}."""
        return self._call(Request("POST", path("sandboxes", sandbox_id, "tools", name), query={"mode": mode}, body=args))

    # Secrets (values are write-only: never read back).

    def set_secret(self, name: str, value: str, scope: Optional[str] = None, user: Optional[str] = None, **fields: Any):
        body = _fields(name=name, value=value, scope=scope, user=user, **fields)
        return self._call(Request("POST", path("secrets"), body=body))

    def list_secrets(self):
        return self._call(Request("GET", path("secrets"), parse=lambda v: v["secrets"]))

    def delete_secret(self, name: str, scope: Optional[str] = None, user: Optional[str] = None):
        return self._call(Request("DELETE", path("secrets", name), query={"scope": scope, "user": user}, parse=lambda _: None))

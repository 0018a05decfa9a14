// Hutch's TypeScript SDK: the API's calls (api/openapi.yaml) on fetch, for
// Node 20+ and browsers. The types come from the OpenAPI document
// (src/schema.ts, made by `npm run generate`); the calls are written here.

import type { components } from "./schema.js";

type Schemas = components["schemas"];
export type Health = Schemas["Health"];
export type Whoami = Schemas["Whoami"];
export type Sandbox = Schemas["Sandbox"];
export type CreateSandboxRequest = Schemas["CreateSandboxRequest"];
export type NetworkPolicy = Schemas["NetworkPolicy"];
export type SandboxStats = Schemas["SandboxStats"];
export type SandboxMetrics = Schemas["SandboxMetrics"];
export type MetricsSample = Schemas["MetricsSample"];
export type ExecRequest = Schemas["ExecRequest"];
export type ExecResult = Schemas["ExecResult"];
export type ExecExit = Schemas["ExecExitEvent"];
export type CodeRequest = Schemas["CodeRequest"];
export type CreateContextRequest = Schemas["CreateContextRequest"];
export type CodeContext = Schemas["CodeContext"];
export type FileEntry = Schemas["FileEntry"];
export type StartProcessRequest = Schemas["StartProcessRequest"];
export type Process = Schemas["Process"];
export type StartServiceRequest = Schemas["StartServiceRequest"];
export type Service = Schemas["Service"];
export type Secret = Schemas["Secret"];
export type APIKey = Schemas["APIKey"];
export type Workspace = Schemas["Workspace"];
export type WorkspaceUsage = Schemas["WorkspaceUsage"];
export type Quota = Schemas["Quota"];
export type Template = Schemas["Template"];
export type NetworkEvent = Schemas["NetworkEvent"];
export type AuditEntry = Schemas["AuditEntry"];
export type Activity = Schemas["Activity"];
export type Checkpoint = Schemas["Checkpoint"];
export type CheckpointDiff = Schemas["CheckpointDiff"];
export type FileChange = Schemas["FileChange"];
export type Desktop = Schemas["Desktop"];
export type DesktopAction = Schemas["DesktopAction"];
export type DesktopShot = Schemas["DesktopShot"];
export type DesktopStream = Schemas["DesktopStream"];
export type Point = Schemas["Point"];
/** What a fork made: the copies, and those that failed, by number. */
export interface ForkResult {
  sandboxes: Sandbox[];
  errors?: { copy: number; code: string; message: string }[];
}
/** A member of the cluster (Node in the OpenAPI document; named apart
 * from the DOM's Node). */
export type ClusterNode = Schemas["Node"];

/** An error the daemon answered: code is one of the API's stable codes
 * (not_found, invalid_argument, …); status the HTTP status, 0 inside a
 * stream. */
export class HutchError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status = 0,
  ) {
    super(message);
    this.name = "HutchError";
  }
}

/** One event of a streamed command: output ("stdout", "stderr"; data as
 * bytes, text decoded), its "exit", or the "end" of a process's logs. */
export interface ExecEvent {
  kind: "stdout" | "stderr" | "exit" | "end";
  data?: Uint8Array;
  text?: string;
  exit?: ExecExit;
}

export interface Options {
  /** The daemon: http(s)://host:port. Default: $HUTCH_URL in Node, the
   * page's own origin in a browser. */
  url?: string;
  /** The API key, sent as a bearer token. Default: $HUTCH_API_KEY in Node. */
  apiKey?: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** The product's user every call is for (the Hutch-User header): whose
   * personal secrets commands get, recorded in the audit log. */
  user?: string;
  /** The workspace the daemon's own key acts in (the Hutch-Workspace
   * header); another key acts in its own only. */
  workspace?: string;
}

interface CallOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  accept?: string;
  signal?: AbortSignal;
}

/** A command as a list (a program and its arguments) or a string (a shell
 * command). */
export type Command = string | string[];

function command(cmd: Command): { cmd?: string[]; command?: string } {
  return typeof cmd === "string" ? { command: cmd } : { cmd };
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

const seg = encodeURIComponent;

export class Hutch {
  readonly url: string;
  #apiKey?: string;
  #fetch: typeof fetch;
  #headers: Record<string, string> = {};
  #opts: Options;

  constructor(opts: Options = {}) {
    const loc = (globalThis as { location?: { origin: string } }).location;
    const url = opts.url ?? env("HUTCH_URL") ?? loc?.origin;
    if (!url) throw new Error("no daemon to talk to: pass url, or set HUTCH_URL");
    this.url = url.replace(/\/+$/, "");
    this.#apiKey = opts.apiKey ?? env("HUTCH_API_KEY");
    this.#fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    if (opts.user) this.#headers["Hutch-User"] = opts.user;
    if (opts.workspace) this.#headers["Hutch-Workspace"] = opts.workspace;
    this.#opts = { ...opts, url: this.url, apiKey: this.#apiKey, fetch: this.#fetch };
  }

  /** A client like this one whose calls are for user (Hutch-User). */
  withUser(user: string): Hutch {
    return new Hutch({ ...this.#opts, user });
  }

  /** A client like this one acting in workspace ws (Hutch-Workspace; the
   * daemon's own key only). */
  withWorkspace(ws: string): Hutch {
    return new Hutch({ ...this.#opts, workspace: ws });
  }

  async #send(method: string, path: string, o: CallOptions = {}): Promise<Response> {
    const u = new URL(this.url + path);
    for (const [k, v] of Object.entries(o.query ?? {})) {
      if (v !== undefined && v !== false) u.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { ...this.#headers, Accept: o.accept ?? "application/json" };
    if (this.#apiKey) headers.Authorization = `Bearer ${this.#apiKey}`;
    let body: BodyInit | undefined;
    if (o.body instanceof Uint8Array || o.body instanceof Blob || o.body instanceof ArrayBuffer) {
      body = o.body as BodyInit;
      headers["Content-Type"] = "application/octet-stream";
    } else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["Content-Type"] = "application/json";
    }
    const res = await this.#fetch(u, { method, headers, body, signal: o.signal });
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  async #json<T>(method: string, path: string, o?: CallOptions): Promise<T> {
    const res = await this.#send(method, path, o);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async *#events(method: string, path: string, o: CallOptions = {}): AsyncGenerator<{ event: string; data: string }> {
    const res = await this.#send(method, path, { ...o, accept: "text/event-stream" });
    if (!res.body || !(res.headers.get("Content-Type") ?? "").startsWith("text/event-stream")) {
      await res.body?.cancel();
      return;
    }
    yield* sse(res.body);
  }

  async *#execEvents(method: string, path: string, o: CallOptions = {}): AsyncGenerator<ExecEvent> {
    for await (const { event, data } of this.#events(method, path, o)) {
      const ev = execEvent(event, data);
      if (ev) yield ev;
    }
  }

  // The daemon.

  /** Who the daemon takes this client's key for (admin or a key, its
   * workspace and modes), and the defaults of what it makes. */
  whoami(): Promise<Whoami> {
    return this.#json("GET", "/v1/whoami");
  }

  health(): Promise<Health> {
    return this.#json("GET", "/v1/health");
  }

  /** The cluster's members (the daemon's own key only): each node as its
   * last heartbeat told, lost ones with why; a single box lists itself. */
  listNodes(): Promise<ClusterNode[]> {
    return this.#json("GET", "/v1/nodes");
  }

  // Sandboxes.

  createSandbox(req: CreateSandboxRequest = {}): Promise<Sandbox> {
    return this.#json("POST", "/v1/sandboxes", { body: req });
  }

  async listSandboxes(workspace?: string): Promise<Sandbox[]> {
    return (await this.#json<{ sandboxes: Sandbox[] }>("GET", "/v1/sandboxes", { query: { workspace } })).sandboxes;
  }

  getSandbox(id: string): Promise<Sandbox> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}`);
  }

  async deleteSandbox(id: string, opts: { wait?: boolean } = {}): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}`, { query: { wait: opts.wait } });
  }

  /** pause, unpause, suspend, resume, stop or start. */
  sandboxAction(id: string, action: "pause" | "unpause" | "suspend" | "resume" | "stop" | "start"): Promise<Sandbox> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/${action}`);
  }

  /** Sets a sandbox's idle timeout, idle action, lifetime or network policy
   * from now. */
  updateSandbox(
    id: string,
    req: { idle_timeout_s?: number; idle_action?: string; max_lifetime_s?: number; network?: NetworkPolicy },
  ): Promise<Sandbox> {
    return this.#json("PATCH", `/v1/sandboxes/${seg(id)}`, { body: req });
  }

  stats(id: string): Promise<SandboxStats> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/stats`);
  }

  /** What a sandbox used over time: its samples taken after since (all it
   * keeps without), oldest first. */
  metrics(id: string, since?: Date): Promise<SandboxMetrics> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/metrics`, { query: { since: since?.toISOString() } });
  }

  activity(id: string): Promise<Activity> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/activity`);
  }

  snapshot(id: string, name: string): Promise<Template> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/snapshot`, { body: { name } });
  }

  /** Copies of the sandbox as it is now (at most 100); the copies made,
   * also when some failed (see forkAll for those). */
  async fork(id: string, count = 1): Promise<Sandbox[]> {
    return (await this.forkAll(id, count)).sandboxes;
  }

  /** A fork's copies, and those that failed, each with its number. */
  forkAll(id: string, count = 1): Promise<ForkResult> {
    return this.#json<ForkResult>("POST", `/v1/sandboxes/${seg(id)}/fork`, { body: { count } });
  }

  /** Records the sandbox's files as they are (with memory, under gVisor,
   * its memory and processes too), while it runs on. */
  checkpoint(id: string, req: { name?: string; memory?: boolean } = {}): Promise<Checkpoint> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/checkpoints`, { body: req });
  }

  async checkpoints(id: string): Promise<Checkpoint[]> {
    return (await this.#json<{ checkpoints: Checkpoint[] }>("GET", `/v1/sandboxes/${seg(id)}/checkpoints`)).checkpoints;
  }

  /** What changed since a checkpoint; with path, that file's unified diff. */
  checkpointDiff(id: string, checkpoint: string, path?: string): Promise<CheckpointDiff> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/checkpoints/${seg(checkpoint)}/diff`, { query: { path } });
  }

  /** Brings the sandbox back to a checkpoint; a running one restarts. */
  rollback(id: string, checkpoint: string, req: { memory?: boolean } = {}): Promise<Sandbox> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/checkpoints/${seg(checkpoint)}/rollback`, { body: req });
  }

  async deleteCheckpoint(id: string, checkpoint: string): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/checkpoints/${seg(checkpoint)}`);
  }

  async networkEvents(id: string): Promise<NetworkEvent[]> {
    return (await this.#json<{ events: NetworkEvent[] }>("GET", `/v1/sandboxes/${seg(id)}/network/events`)).events;
  }

  // Commands.

  /** Runs a command to its end; a non-zero exit is a result, not an error. */
  exec(id: string, cmd: Command, opts: Omit<ExecRequest, "cmd" | "command"> = {}): Promise<ExecResult> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/exec`, { body: { ...opts, ...command(cmd) } });
  }

  /** Runs a command, yielding its output as it comes, then its exit. */
  execStream(
    id: string,
    cmd: Command,
    opts: Omit<ExecRequest, "cmd" | "command"> & { signal?: AbortSignal } = {},
  ): AsyncGenerator<ExecEvent> {
    const { signal, ...req } = opts;
    return this.#execEvents("POST", `/v1/sandboxes/${seg(id)}/exec`, { body: { ...req, ...command(cmd) }, signal });
  }

  runCode(id: string, req: CodeRequest): Promise<ExecResult> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/code`, { body: req });
  }

  /** Starts a kernel in which code run with its id as context_id keeps its
   * state (failed_precondition when the sandbox lacks the kernel). */
  createContext(id: string, req: CreateContextRequest): Promise<CodeContext> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/contexts`, { body: req });
  }

  async listContexts(id: string): Promise<CodeContext[]> {
    return (await this.#json<{ contexts: CodeContext[] }>("GET", `/v1/sandboxes/${seg(id)}/contexts`)).contexts;
  }

  /** Restarts a context's kernel: its state is gone. */
  restartContext(id: string, context: string): Promise<CodeContext> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/contexts/${seg(context)}/restart`);
  }

  async deleteContext(id: string, context: string): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/contexts/${seg(context)}`);
  }

  /** Opens a terminal session (the PTY WebSocket) where a WebSocket class
   * is (browsers, Node 22+). The key goes as a subprotocol, not in the URL:
   * a browser cannot set headers on a WebSocket. Binary frames are the
   * terminal's bytes both ways; text frames JSON control messages. */
  terminal(
    id: string,
    opts: { cols?: number; rows?: number; cmd?: string; cwd?: string; user?: string; tty?: boolean } = {},
  ): WebSocket {
    const u = new URL(`${this.url}/v1/sandboxes/${seg(id)}/pty`);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    for (const [k, v] of Object.entries(opts)) if (v !== undefined) u.searchParams.set(k, String(v));
    const protocols = ["hutch.v1"];
    if (this.#apiKey) protocols.push(`hutch.bearer.${this.#apiKey}`);
    const ws = new WebSocket(u, protocols);
    ws.binaryType = "arraybuffer";
    return ws;
  }

  // Files, inside the sandbox.

  async readFile(id: string, path: string, opts: { user?: string } = {}): Promise<Uint8Array> {
    const res = await this.#send("GET", `/v1/sandboxes/${seg(id)}/files`, { query: { path, ...opts }, accept: "application/octet-stream" });
    return new Uint8Array(await res.arrayBuffer());
  }

  async readText(id: string, path: string, opts: { user?: string } = {}): Promise<string> {
    return new TextDecoder().decode(await this.readFile(id, path, opts));
  }

  /** Writes a file (its directories made) and returns its entry. */
  writeFile(id: string, path: string, data: string | Uint8Array | Blob, opts: { user?: string } = {}): Promise<FileEntry> {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return this.#json("PUT", `/v1/sandboxes/${seg(id)}/files`, { query: { path, ...opts }, body });
  }

  statFile(id: string, path: string, opts: { user?: string } = {}): Promise<FileEntry> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/files/stat`, { query: { path, ...opts } });
  }

  async listFiles(id: string, path = ".", opts: { depth?: number; user?: string } = {}): Promise<FileEntry[]> {
    const q = { path, ...opts };
    return (await this.#json<{ entries: FileEntry[] }>("GET", `/v1/sandboxes/${seg(id)}/files/list`, { query: q })).entries;
  }

  makeDir(id: string, path: string, opts: { user?: string } = {}): Promise<FileEntry> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/files/mkdir`, { body: { path, ...opts } });
  }

  moveFile(id: string, source: string, destination: string, opts: { user?: string } = {}): Promise<FileEntry> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/files/move`, { body: { source, destination, ...opts } });
  }

  async deleteFile(id: string, path: string, opts: { user?: string } = {}): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/files`, { query: { path, ...opts } });
  }

  // Background processes.

  startProcess(id: string, cmd: Command, opts: Omit<StartProcessRequest, "cmd" | "command"> = {}): Promise<Process> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/processes`, { body: { ...opts, ...command(cmd) } });
  }

  async listProcesses(id: string): Promise<Process[]> {
    return (await this.#json<{ processes: Process[] }>("GET", `/v1/sandboxes/${seg(id)}/processes`)).processes;
  }

  /** A process's output so far, and with follow what it writes next, then
   * "end". */
  processLogs(id: string, name: string, opts: { follow?: boolean; signal?: AbortSignal } = {}): AsyncGenerator<ExecEvent> {
    return this.#execEvents("GET", `/v1/sandboxes/${seg(id)}/processes/${seg(name)}/logs`, {
      query: { follow: opts.follow },
      signal: opts.signal,
    });
  }

  async signalProcess(id: string, name: string, signal = "TERM"): Promise<void> {
    await this.#json("POST", `/v1/sandboxes/${seg(id)}/processes/${seg(name)}/signal`, { body: { signal } });
  }

  async sendInput(id: string, name: string, data: string, opts: { close?: boolean } = {}): Promise<void> {
    await this.#json("POST", `/v1/sandboxes/${seg(id)}/processes/${seg(name)}/stdin`, { body: { data, ...opts } });
  }

  async deleteProcess(id: string, name: string): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/processes/${seg(name)}`);
  }

  // Services and their previews.

  startService(id: string, cmd: Command, port: number, opts: Omit<StartServiceRequest, "cmd" | "command" | "port"> = {}): Promise<Service> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/services`, { body: { ...opts, port, ...command(cmd) } });
  }

  async listServices(id: string): Promise<Service[]> {
    return (await this.#json<{ services: Service[] }>("GET", `/v1/sandboxes/${seg(id)}/services`)).services;
  }

  getService(id: string, name: string): Promise<Service> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/services/${seg(name)}`);
  }

  serviceAction(id: string, name: string, action: "stop" | "restart"): Promise<Service> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/services/${seg(name)}/${action}`);
  }

  async deleteService(id: string, name: string): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/services/${seg(name)}`);
  }

  /** A link to a service's preview that works without the key until it
   * expires. */
  serviceLink(id: string, name: string, expiresInS?: number): Promise<{ url: string; path_url: string; expires_at: string }> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/services/${seg(name)}/link`, { body: { expires_in_s: expiresInS } });
  }

  /** Revokes every link to the service's preview made until now; links
   * made later work. */
  async revokeServiceLinks(id: string, name: string): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/services/${seg(name)}/link`);
  }

  /** A PNG of the page a service serves (needs the browser template). */
  async screenshot(
    id: string,
    name: string,
    req: { path?: string; width?: number; height?: number; full_page?: boolean; clip?: { x: number; y: number; w: number; h: number } } = {},
  ): Promise<Uint8Array> {
    const res = await this.#send("POST", `/v1/sandboxes/${seg(id)}/services/${seg(name)}/screenshot`, { body: req, accept: "image/png" });
    return new Uint8Array(await res.arrayBuffer());
  }

  // A sandbox's desktop (template desktop).

  /** Starts the desktop at a size (default 1024x768) and its live view;
   * resolves once it shows. A running one is left as it is. */
  startDesktop(id: string, size: { width?: number; height?: number } = {}): Promise<Desktop> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/desktop`, { body: size });
  }

  /** Whether the desktop runs, its size, the pointer, the latest actions. */
  desktop(id: string): Promise<Desktop> {
    return this.#json("GET", `/v1/sandboxes/${seg(id)}/desktop`);
  }

  async stopDesktop(id: string): Promise<void> {
    await this.#json("DELETE", `/v1/sandboxes/${seg(id)}/desktop`);
  }

  /** A PNG of the screen: all of it or a region, scaled down or not. */
  async desktopScreenshot(id: string, shot: DesktopShot = {}): Promise<Uint8Array> {
    const r = shot.region;
    const query = { x: r?.x, y: r?.y, w: r?.w, h: r?.h, scale: shot.scale };
    const res = await this.#send("GET", `/v1/sandboxes/${seg(id)}/desktop/screenshot`, { query, accept: "image/png" });
    return new Uint8Array(await res.arrayBuffer());
  }

  /** Does actions in order (move, click, double_click, triple_click,
   * mouse_down, mouse_up, drag, scroll, type, key, wait); with screenshot,
   * the answer has a PNG taken after them. */
  async desktopActions(
    id: string,
    actions: DesktopAction[],
    opts: { screenshot?: DesktopShot } = {},
  ): Promise<{ cursor: Point; screenshot?: Uint8Array }> {
    const res = await this.#json<{ cursor: Point; screenshot?: string }>("POST", `/v1/sandboxes/${seg(id)}/desktop/actions`, {
      body: { actions, screenshot: opts.screenshot },
    });
    return { cursor: res.cursor, screenshot: res.screenshot ? base64Bytes(res.screenshot) : undefined };
  }

  /** A link to watch the desktop live in a browser (noVNC, an origin of its
   * own); view-only unless control. */
  desktopStream(id: string, opts: { control?: boolean; expires_in_s?: number } = {}): Promise<DesktopStream> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/desktop/stream`, { body: opts });
  }

  // Tools for LLM agents.

  /** The tool catalogue: "anthropic" (name, description, input_schema) or
   * "openai" (type function, with parameters). */
  async listTools(format: "anthropic" | "openai" = "anthropic"): Promise<Record<string, unknown>[]> {
    return (await this.#json<{ tools: Record<string, unknown>[] }>("GET", "/v1/tools", { query: { format } })).tools;
  }

  runTool(id: string, name: string, args: unknown, opts: { mode?: string } = {}): Promise<Record<string, unknown>> {
    return this.#json("POST", `/v1/sandboxes/${seg(id)}/tools/${seg(name)}`, { query: opts, body: args });
  }

  // Secrets: values are written, never read back.

  setSecret(req: { name: string; value: string; scope?: "workspace" | "user"; user?: string; description?: string; inject?: string; hosts?: string[] }): Promise<Secret> {
    return this.#json("POST", "/v1/secrets", { body: req });
  }

  async listSecrets(): Promise<Secret[]> {
    return (await this.#json<{ secrets: Secret[] }>("GET", "/v1/secrets")).secrets;
  }

  async deleteSecret(name: string, opts: { scope?: "workspace" | "user"; user?: string } = {}): Promise<void> {
    await this.#json("DELETE", `/v1/secrets/${seg(name)}`, { query: opts });
  }

  // API keys, workspaces and the audit log.

  createKey(req: { name: string; workspace?: string; tools_mode?: string; network_mode?: string }): Promise<APIKey> {
    return this.#json("POST", "/v1/keys", { body: req });
  }

  async listKeys(): Promise<APIKey[]> {
    return (await this.#json<{ keys: APIKey[] }>("GET", "/v1/keys")).keys;
  }

  async deleteKey(name: string): Promise<void> {
    await this.#json("DELETE", `/v1/keys/${seg(name)}`);
  }

  async listWorkspaces(): Promise<Workspace[]> {
    return (await this.#json<{ workspaces: Workspace[] }>("GET", "/v1/workspaces")).workspaces;
  }

  workspaceUsage(ws: string): Promise<WorkspaceUsage> {
    return this.#json("GET", `/v1/workspaces/${seg(ws)}/usage`);
  }

  /** Sets a workspace's quota (the daemon's own key only); 0 or absent is
   * no bound. */
  setQuota(ws: string, quota: Quota): Promise<WorkspaceUsage> {
    return this.#json("PUT", `/v1/workspaces/${seg(ws)}/quota`, { body: quota });
  }

  async listTemplates(): Promise<Template[]> {
    return (await this.#json<{ templates: Template[] }>("GET", "/v1/templates")).templates;
  }
}

async function errorOf(res: Response): Promise<HutchError> {
  const text = await res.text();
  try {
    const { error } = JSON.parse(text) as { error: { code: string; message: string } };
    return new HutchError(error.code, error.message, res.status);
  } catch {
    return new HutchError("internal", text.trim() || `HTTP ${res.status}`, res.status);
  }
}

function execEvent(event: string, data: string): ExecEvent | undefined {
  switch (event) {
    case "stdout":
    case "stderr": {
      const v = JSON.parse(data) as { data?: string; data_base64?: string };
      const bytes = v.data_base64 !== undefined ? base64Bytes(v.data_base64) : new TextEncoder().encode(v.data ?? "");
      return { kind: event, data: bytes, text: new TextDecoder().decode(bytes) };
    }
    case "exit":
      return { kind: "exit", exit: JSON.parse(data) as ExecExit };
    case "end":
      return { kind: "end" };
    case "error": {
      const { error } = JSON.parse(data) as { error: { code: string; message: string } };
      throw new HutchError(error.code, error.message);
    }
  }
  return undefined; // reserved event names are skipped
}

function base64Bytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The events of a text/event-stream body. */
export async function* sse(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const reader = body.pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>).getReader();
  let buf = "";
  let event = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, "");
        buf = buf.slice(i + 1);
        if (line === "") {
          if (event || data.length) yield { event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
        } else if (!line.startsWith(":")) {
          const c = line.indexOf(":");
          const name = c < 0 ? line : line.slice(0, c);
          const value = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
          if (name === "event") event = value;
          else if (name === "data") data.push(value);
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

// The sandbox list: every sandbox the key may see, refreshed every two
// seconds, filtered in the page; a form to create one; and each one's
// actions.
//
// The list call answers with what the store holds. What a sandbox is doing
// (its idle countdown and what keeps it awake, its CPU and memory) costs a
// call to its agent or its cgroups, so it is asked only for the rows on
// screen, at most every ten seconds each: a list of 500 costs what the 20
// in view do. The countdown ticks in the page between those calls.

import type { CreateSandboxRequest, Hutch, Sandbox, SandboxStats, Activity } from "../../sdk/typescript/src/index";
import { age, h, listTable, message, select } from "./dom";

/** How long a row's activity and stats are kept before they are asked for
 * again, while the row is on screen. */
const detailEvery = 10_000;

interface Detail {
  at: number; // when it was asked for
  activity?: Activity;
  stats?: SandboxStats;
  cpu?: number; // share of one CPU, from the last two stats
  error?: string;
}

export function sandboxesPanel(client: Hutch, refused: (err: unknown) => boolean): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", "aria-live": "polite", class: "muted", id: "sandboxes-status" });
  const { table, fill } = listTable("Sandboxes", ["ID", "State", "Runtime", "Template", "User", "Age", "Idle", "CPU · memory", "Actions"]);
  let all: Sandbox[] = [];

  // Filters: text (in id, template, user, key, metadata), state, runtime.
  const text = h("input", { id: "filter-text", name: "filter-text", type: "search", placeholder: "id, template, user…" });
  const state = select("filter-state", ["", "running", "paused", "suspended", "stopped", "error"], "any");
  const runtime = select("filter-runtime", ["", "runc", "gvisor"], "any");
  const filters = h(
    "form",
    { class: "row", role: "search", "aria-label": "Filter sandboxes" },
    h("label", { for: "filter-text" }, "Filter", text),
    h("label", { for: "filter-state" }, "State", state),
    h("label", { for: "filter-runtime" }, "Runtime", runtime),
  );
  filters.addEventListener("submit", (e) => e.preventDefault());
  for (const el of [text, state, runtime]) el.addEventListener("input", () => render());
  const shown = (sb: Sandbox) => {
    const q = text.value.trim().toLowerCase();
    const hay = [sb.id, sb.template, sb.user, sb.key, ...Object.entries(sb.metadata ?? {}).flat()].join(" ").toLowerCase();
    return (!q || hay.includes(q)) && (!state.value || sb.state === state.value) && (!runtime.value || sb.runtime === runtime.value);
  };

  // An action on row id first lets that row's activity and stats call end
  // and holds the next one off until the list has shown what the action
  // did: stats asked of a sandbox that stopped running in between (a
  // suspend, a stop) is refused with 412, or 404 once it is deleted, and
  // the browser reports either as an error of the page.
  const act = async (id: string, label: string, fn: () => Promise<unknown>) => {
    status.textContent = `${label}…`;
    changing.add(id);
    await inFlight.get(id);
    try {
      const said = await fn();
      status.textContent = `${label}: ${typeof said === "string" ? said : "done."}`;
    } catch (err) {
      status.textContent = `${label}: ${message(err)}`;
    }
    await refresh();
    changing.delete(id);
  };

  // Activity and stats of the rows on screen.
  const details = new Map<string, Detail>();
  const inFlight = new Map<string, Promise<void>>();
  const changing = new Set<string>(); // rows with an action under way (see act)
  const onScreen = new Set<string>();
  const visible = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const id = (e.target as HTMLElement).dataset.id!;
      if (e.isIntersecting) {
        onScreen.add(id);
        detail(id);
      } else {
        onScreen.delete(id);
      }
    }
  });
  function detail(id: string) {
    const sb = all.find((s) => s.id === id);
    const old = details.get(id);
    if (!sb || (sb.state !== "running" && sb.state !== "paused") || inFlight.has(id) || changing.has(id) || (old && Date.now() - old.at < detailEvery)) return;
    inFlight.set(id, ask(sb, old).finally(() => inFlight.delete(id)));
  }

  // ask asks for sb's activity, and its stats while it runs, and shows
  // them in its row. It does not fail: an error is shown in the row.
  async function ask(sb: Sandbox, old?: Detail) {
    const d: Detail = { at: Date.now() };
    try {
      d.activity = await client.activity(sb.id);
      if (d.activity.state === "running") {
        d.stats = await client.stats(sb.id);
        if (old?.stats) d.cpu = (d.stats.cpu_time_ms - old.stats.cpu_time_ms) / (d.at - old.at);
      }
    } catch (err) {
      d.error = message(err);
    }
    details.set(sb.id, d);
    const row = table.querySelector<HTMLElement>(`tr[data-id="${CSS.escape(sb.id)}"]`);
    if (row) {
      row.querySelector(".idle")!.replaceWith(idleCell(sb, d));
      row.querySelector(".usage")!.replaceWith(usageCell(d));
    }
  }

  const row = (sb: Sandbox) => {
    const buttons = h("td", { class: "actions" });
    const more = h("div", { class: "menu", role: "group", "aria-label": `More actions for ${sb.id}` });
    const button = (text: string, fn: () => Promise<unknown>, opts: { cls?: string; into?: HTMLElement } = {}) => {
      const b = h("button", { type: "button", class: opts.cls ?? "", "aria-label": `${text} ${sb.id}` }, text);
      b.addEventListener("click", () => {
        more.closest("details")?.removeAttribute("open"); // a menu closes once an action is chosen
        void act(sb.id, `${text} ${sb.id}`, fn);
      });
      (opts.into ?? buttons).append(b);
    };
    const inMore = { into: more };
    switch (sb.state) {
      case "running":
        button("Suspend", () => client.sandboxAction(sb.id, "suspend"));
        button("Pause", () => client.sandboxAction(sb.id, "pause"), inMore);
        button("Stop", () => client.sandboxAction(sb.id, "stop"), inMore);
        button("Keep alive", () => client.updateSandbox(sb.id, { idle_timeout_s: sb.idle_timeout_s || undefined }).then(() => "the idle timer starts again."), inMore);
        button("Snapshot", () => snapshot(sb), inMore);
        button("Fork", () => client.fork(sb.id).then((f) => `made ${f.map((s) => s.id).join(", ")}.`), inMore);
        break;
      case "paused":
        button("Resume", () => client.sandboxAction(sb.id, "unpause"));
        button("Stop", () => client.sandboxAction(sb.id, "stop"), inMore);
        break;
      case "suspended":
      case "error":
        button("Resume", () => client.sandboxAction(sb.id, "resume"));
        button("Stop", () => client.sandboxAction(sb.id, "stop"), inMore);
        break;
      case "stopped":
        button("Start", () => client.sandboxAction(sb.id, "start"));
        break;
    }
    button("Delete", () => client.deleteSandbox(sb.id), { cls: "danger" });
    if (more.childElementCount) buttons.append(h("details", { class: "more" }, h("summary", { "aria-label": `More actions for ${sb.id}` }, "More"), more));
    const d = details.get(sb.id);
    return h(
      "tr",
      { "data-id": sb.id },
      h("td", {}, h("a", { href: `#/sandboxes/${sb.id}` }, sb.id)),
      h("td", { class: `state ${sb.state}`, title: sb.state_reason ?? "" }, sb.state ?? ""),
      h("td", {}, sb.runtime ?? ""),
      h("td", {}, sb.template ?? ""),
      h("td", {}, sb.user ?? ""),
      h("td", {}, age(sb.created_at)),
      idleCell(sb, d),
      usageCell(d),
      buttons,
    );
  };

  async function snapshot(sb: Sandbox): Promise<string> {
    const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "").toLowerCase();
    const t = await client.snapshot(sb.id, `${sb.id}-${stamp}`);
    return `saved as template ${t.name}.`;
  }

  // Rows are kept while their sandbox is unchanged, and a changed row is
  // replaced where it stands: a refresh does not close a row's open menu
  // nor take the focus from its buttons.
  const rows = new Map<string, { sig: string; tr: HTMLElement }>();
  function render() {
    const list = all.filter(shown);
    const want = list.map((sb) => {
      const sig = JSON.stringify(sb);
      let r = rows.get(sb.id);
      if (r?.sig !== sig) {
        if (r) visible.unobserve(r.tr);
        r = { sig, tr: row(sb) };
        visible.observe(r.tr);
        rows.set(sb.id, r);
      }
      return r.tr;
    });
    for (const [id, r] of rows) {
      if (!all.some((s) => s.id === id)) {
        visible.unobserve(r.tr);
        rows.delete(id);
        onScreen.delete(id);
      }
    }
    const body = table.tBodies[0];
    const now = [...body.children];
    if (want.length && want.length === now.length && want.every((tr, i) => tr === now[i] || !want.includes(now[i] as HTMLElement))) {
      want.forEach((tr, i) => tr !== now[i] && now[i].replaceWith(tr));
    } else {
      fill(want, all.length ? "No sandbox matches the filter." : "No sandboxes yet.");
    }
  }

  async function refresh() {
    try {
      all = await client.listSandboxes();
      all.sort((a, b) => (b.created_at ?? "").localeCompare(a.created_at ?? ""));
      for (const id of details.keys()) if (!all.some((s) => s.id === id)) details.delete(id);
      render();
      for (const id of onScreen) detail(id); // each at most every detailEvery
    } catch (err) {
      if (!refused(err)) status.textContent = message(err);
    }
  }

  // The countdowns tick every second from when the idle timer acts.
  const tick = window.setInterval(() => {
    for (const el of table.querySelectorAll<HTMLElement>("[data-action-at]")) {
      el.firstChild!.textContent = countdown(Number(el.dataset.actionAt), el.dataset.action!);
    }
  }, 1000);

  void refresh();
  const timer = window.setInterval(refresh, 2000);
  const panel = h("div", {}, createForm(client, status, refresh), filters, status, table);
  return {
    panel,
    close: () => {
      clearInterval(timer);
      clearInterval(tick);
      visible.disconnect();
    },
  };
}

function countdown(at: number, action: string): string {
  const s = Math.max(0, Math.round((at - Date.now()) / 1000));
  return `${action} in ${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// idleCell says when the idle timer acts, or what keeps the sandbox awake.
function idleCell(sb: Sandbox, d?: Detail): HTMLTableCellElement {
  const cell = h("td", { class: "idle" });
  const a = d?.activity;
  if (!a || (sb.state !== "running" && sb.state !== "paused")) {
    cell.append(sb.state === "running" ? "…" : "");
    return cell;
  }
  const why = (a.reasons ?? []).join("; ");
  if (a.action_at) {
    cell.dataset.actionAt = String(Date.parse(a.action_at));
    cell.dataset.action = a.idle_action ?? "suspend";
    cell.append(countdown(Date.parse(a.action_at), cell.dataset.action));
  } else {
    cell.append(h("span", { class: "awake" }, "awake"), h("span", { class: "muted small" }, why ? ` · ${why}` : ""));
  }
  cell.title = why;
  return cell;
}

function usageCell(d?: Detail): HTMLTableCellElement {
  const s = d?.stats;
  if (!s) return h("td", { class: "usage" }, d?.error ? "—" : "");
  const mib = (b: number) => `${Math.round(b / (1 << 20))} MiB`;
  const cpu = d?.cpu === undefined ? "" : `${Math.round(d.cpu * 100)}% CPU · `;
  const limit = s.memory_limit_bytes > 0 ? ` of ${mib(s.memory_limit_bytes)}` : "";
  return h("td", { class: "usage" }, `${cpu}${mib(s.memory_bytes)}${limit}`);
}

// createForm makes a sandbox: template and runtime at hand, the rest
// (limits, idle timeout, network policy, volumes, a key, the user it is
// for) under "More options".
function createForm(client: Hutch, status: HTMLElement, refresh: () => Promise<void>): HTMLElement {
  const field = (id: string, label: string, attrs: Record<string, string> = {}) => {
    const input = h("input", { id, name: id, ...attrs });
    return { input, label: h("label", { for: id }, label, input) };
  };
  const template = field("template", "Template", { placeholder: "base" });
  const runtime = select("runtime", ["", "runc", "gvisor"], "default");
  const cpus = field("cpus", "CPUs", { type: "number", min: "0.1", step: "0.1", placeholder: "1" });
  const memory = field("memory", "Memory (MiB)", { type: "number", min: "16", placeholder: "512" });
  const disk = field("disk", "Disk (MiB)", { type: "number", min: "16" });
  const idle = field("idle", "Idle timeout (s)", { type: "number", min: "1", placeholder: "300" });
  const idleAction = select("idle-action", ["", "suspend", "stop", "delete"], "default");
  const network = select("network", ["", "none", "allowlist", "full", "learn"], "default");
  const allow = field("allow", "Allow (comma-separated)", { placeholder: "pypi.org, *.github.com" });
  const volumes = field("volumes", "Volumes (name or name:path)", { placeholder: "data:/mnt/data" });
  const key = field("sandbox-key", "Key (get or create)", { placeholder: "chat-42" });
  const user = field("sandbox-user", "For user", { placeholder: "alice" });
  const list = (v: string) =>
    v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  const num = (el: HTMLInputElement) => (el.value === "" ? undefined : Number(el.value));
  const form = h(
    "form",
    { class: "create", "aria-label": "Create a sandbox" },
    h("div", { class: "row" }, template.label, h("label", { for: "runtime" }, "Runtime", runtime), h("button", { type: "submit", class: "primary" }, "Create sandbox")),
    h(
      "details",
      {},
      h("summary", {}, "More options"),
      h(
        "div",
        { class: "row" },
        cpus.label,
        memory.label,
        disk.label,
        idle.label,
        h("label", { for: "idle-action" }, "When idle", idleAction),
        h("label", { for: "network" }, "Network", network),
        allow.label,
        volumes.label,
        key.label,
        user.label,
      ),
    ),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const req: CreateSandboxRequest = {
      template: template.input.value.trim() || undefined,
      runtime: (runtime.value || undefined) as Sandbox["runtime"],
      cpus: num(cpus.input),
      memory_mb: num(memory.input),
      disk_mb: num(disk.input),
      idle_timeout_s: num(idle.input),
      idle_action: (idleAction.value || undefined) as CreateSandboxRequest["idle_action"],
      key: key.input.value.trim() || undefined,
      user: user.input.value.trim() || undefined,
      volumes: list(volumes.input.value).map((v) => {
        const [name, path] = v.split(":");
        return { name, path: path || undefined };
      }),
    };
    if (network.value) req.network = { mode: network.value as "none" | "allowlist" | "full", allow: list(allow.input.value) };
    if (!req.volumes?.length) delete req.volumes;
    status.textContent = "Creating…";
    try {
      const sb = await client.createSandbox(req);
      status.textContent = `Created ${sb.id}.`;
      await refresh();
    } catch (err) {
      status.textContent = message(err);
    }
  });
  return form;
}

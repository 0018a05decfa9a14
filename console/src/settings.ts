// Settings of the key's workspace: what its sandboxes use against its
// quota (which the daemon's own key alone may set), what network a new
// sandbox gets, and the modes a key bounds its sandboxes and tool calls
// with.
// Who signed in, and the daemon's defaults, come from GET /v1/whoami.

import type { Health, Hutch, Quota, Whoami, Workspace, WorkspaceUsage } from "../../sdk/typescript/src/index";
import { h, listTable, message, select } from "./dom";
import "./settings.css";

/** Who signed in: whoami's answer, and the workspaces it sees. */
interface Caller extends Whoami {
  workspaces: Workspace[];
}

async function whoAmI(client: Hutch): Promise<Caller> {
  const [me, workspaces] = await Promise.all([client.whoami(), client.listWorkspaces()]);
  return { ...me, workspaces };
}

/** The quota's bounds, in the order shown, with how to read them. */
const bounds: { field: keyof Quota; what: string; label: string; unit: string; step: string }[] = [
  { field: "sandboxes", what: "Running sandboxes", label: "Running sandboxes", unit: "", step: "1" },
  { field: "memory_mb", what: "Memory", label: "Memory (MiB)", unit: "MiB", step: "1" },
  { field: "cpus", what: "CPUs", label: "CPUs", unit: "", step: "0.1" },
  { field: "disk_mb", what: "Disk", label: "Disk (MiB)", unit: "MiB", step: "1" },
  { field: "sandbox_hours", what: "Sandbox hours today", label: "Sandbox hours a day", unit: "h", step: "0.1" },
];

function amount(n: number, unit: string): string {
  const v = String(Number(n.toFixed(2)));
  return unit ? `${v} ${unit}` : v;
}

/** A bar of used against limit (none: no bound). */
function bar(what: string, used: number, limit: number | undefined, unit: string): HTMLElement {
  if (!limit) return h("span", { class: "muted" }, "no bound");
  const share = used / limit;
  const fill = h("span", { class: "fill" });
  fill.style.width = `${Math.min(100, share * 100)}%`;
  const el = h(
    "div",
    {
      class: share >= 1 ? "bar full" : share >= 0.8 ? "bar high" : "bar",
      role: "meter",
      "aria-valuemin": "0",
      "aria-valuemax": String(limit),
      "aria-valuenow": String(used),
      "aria-label": `${what}: ${amount(used, unit)} of ${amount(limit, unit)}`,
    },
    fill,
  );
  return h("div", { class: "bar-row" }, el, h("span", { class: "share" }, `${Math.round(share * 100)} %`));
}

/** Quotas and usage: a table of each bound with a bar, and for the daemon's
 * own key a form that sets them. */
function quotaSection(client: Hutch, who: Caller): { section: HTMLElement; refresh: () => Promise<void> } {
  const status = h("p", { role: "status", class: "muted", id: "quota-status" });
  const { table, fill } = listTable("Usage and quota", ["Bound", "In use", "Quota", "Of the quota"]);
  const day = h("p", { class: "muted" });
  let ws = who.workspace;
  const inputs = new Map<keyof Quota, HTMLInputElement>();
  const show = (u: WorkspaceUsage) => {
    table.setAttribute("aria-label", `Usage and quota of workspace ${u.workspace}`);
    fill(
      bounds.map((b) => {
        const used = u[b.field] as number;
        const limit = u.quota[b.field];
        return h(
          "tr",
          {},
          h("th", { scope: "row" }, b.what),
          h("td", { "data-label": "In use" }, amount(used, b.unit)),
          h("td", { "data-label": "Quota" }, limit ? amount(limit, b.unit) : "none"),
          h("td", { "data-label": "Of the quota" }, bar(b.what, used, limit, b.unit)),
        );
      }),
      "",
    );
    day.textContent = `Sandbox hours are counted every 30 s, for the UTC day ${u.day}. Memory and CPUs are the limits of running sandboxes, summed; disk also counts suspended and stopped ones, which keep their files.`;
  };
  const fillForm = (q: Quota) => {
    for (const [field, input] of inputs) input.value = q[field] ? String(q[field]) : "";
  };
  const refresh = async () => {
    try {
      show(await client.workspaceUsage(ws));
    } catch (err) {
      status.textContent = message(err);
    }
  };

  const section = h(
    "section",
    { class: "settings-part", "aria-labelledby": "quota-title" },
    h("h3", { id: "quota-title" }, "Quotas and usage"),
    h(
      "p",
      { class: "muted" },
      "What the workspace's sandboxes use now, against its quota. A create, or a resume or start, that would pass a bound is refused (resource_exhausted); what runs already is not touched.",
    ),
  );
  if (who.admin) {
    const names = who.workspaces.map((w) => w.name);
    if (!names.includes(ws)) names.unshift(ws);
    const pick = select("quota-workspace", names);
    pick.value = ws;
    pick.addEventListener("change", async () => {
      ws = pick.value;
      status.textContent = "";
      await refresh();
      fillForm(who.workspaces.find((w) => w.name === ws)?.quota ?? {});
    });
    section.append(h("div", { class: "row" }, h("label", { for: "quota-workspace" }, "Workspace", pick)));
  } else {
    section.append(h("p", {}, "Workspace ", h("strong", {}, ws), "."));
  }
  section.append(table, day);

  if (who.admin) {
    const form = h("form", { class: "row quota-form", "aria-label": "Set the quota" });
    for (const b of bounds) {
      const id = `quota-${b.field.replace("_", "-")}`;
      const input = h("input", { id, name: id, type: "number", min: "0", step: b.step, inputmode: "decimal", placeholder: "no bound" });
      inputs.set(b.field, input);
      form.append(h("label", { for: id }, b.label, input));
    }
    form.append(h("button", { type: "submit", class: "primary" }, "Set quota"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const q: Record<string, number> = {};
      for (const [field, input] of inputs) if (input.value !== "" && Number(input.value) > 0) q[field] = Number(input.value);
      try {
        const u = await client.setQuota(ws, q);
        show(u);
        fillForm(u.quota);
        const w = who.workspaces.find((x) => x.name === ws);
        if (w) w.quota = u.quota;
        status.textContent = `Set the quota of ${ws}.`;
      } catch (err) {
        status.textContent = `The quota was not set: ${message(err)}`;
      }
    });
    fillForm(who.workspaces.find((w) => w.name === ws)?.quota ?? {});
    section.append(
      h("h4", {}, "Set the quota"),
      h("p", { class: "muted" }, "Empty or 0 is no bound; setting it replaces the whole quota. Only the daemon's own key may set it, which is the key you signed in with."),
      form,
    );
  } else {
    section.append(
      h(
        "p",
        { class: "note" },
        "Only the daemon's own key (api.key in its data directory) may set a quota: a key is refused (permission_denied). Ask whoever runs the daemon, or use ",
        h("code", {}, `PUT /v1/workspaces/${ws}/quota`),
        " with that key.",
      ),
    );
  }
  section.append(status);
  return { section, refresh };
}

/** The network modes, most isolated first, as netpolicy ranks them. */
const networkModes: [string, string][] = [
  ["none", "Loopback only: nothing leaves the sandbox."],
  ["allowlist", "Only the names and addresses its policy allows (pypi.org, *.github.com, 203.0.113.0/24), minus what it denies."],
  ["full", "The public internet, minus what its policy denies."],
];

/** The tool-call modes, most isolated first. */
const toolsModes: [string, string][] = [
  ["all", "Every tool call runs in the sandbox."],
  ["selective", "Risky calls (network, package installs, privileges, writes outside the workspace) run in the sandbox, the rest on the host. Needs the daemon's tools_host_dir."],
  ["off", "Every call runs on the host: trusted local development only. Needs the daemon's tools_host_dir."],
];

/** What this key may do with a mode: its own (the least isolated it may
 * use), one it may ask for, or one it is refused. */
/** Where mode stands among modes, most isolated first. */
function rank(modes: [string, string][], mode: string): number {
  return modes.findIndex(([m]) => m === mode);
}

function mayUse(modes: [string, string][], own: string | undefined, mode: string, admin: boolean): string {
  if (admin || !own) return "allowed";
  if (mode === own) return "its mode";
  return rank(modes, mode) < rank(modes, own) ? "allowed" : "refused";
}

function signedInAs(who: Caller): string {
  if (who.admin) return "You signed in with the daemon's own key: it sees every workspace, acts in default, and is bound by no mode.";
  return `You signed in with key ${who.key} of workspace ${who.workspace}.`;
}

/** Network defaults: what a sandbox that names no policy gets, and where
 * that is set; read-only, as the API has no call to change it. */
function networkSection(who: Caller, health: Health | undefined): HTMLElement {
  const { table, fill } = listTable("Defaults of a new sandbox", ["Setting", "When none is named", "Set where"]);
  const keyMode = who.network_mode;
  const daemonMode = who.defaults.network_mode;
  let network: string = daemonMode;
  if (keyMode && rank(networkModes, keyMode) < rank(networkModes, daemonMode)) network = `${keyMode} (the daemon's default, ${daemonMode}, is less isolated than the key's mode)`;
  const keyTools = who.tools_mode;
  fill(
    [
      h(
        "tr",
        {},
        h("th", { scope: "row" }, "Network mode"),
        h("td", { "data-label": "When none is named" }, network),
        h("td", { "data-label": "Set where" }, h("code", {}, "hutch serve --network-default"), " (network_default in the daemon's config file); bounded by each key's network mode"),
      ),
      h(
        "tr",
        {},
        h("th", { scope: "row" }, "Tool calls' mode"),
        h("td", { "data-label": "When none is named" }, keyTools || who.defaults.tools_mode),
        h("td", { "data-label": "Set where" }, h("code", {}, "hutch serve --tools-mode"), " (tools_mode in the config file); each key's tools mode"),
      ),
      h(
        "tr",
        {},
        h("th", { scope: "row" }, "Runtime"),
        h("td", { "data-label": "When none is named" }, health ? health.default_runtime : "unknown", health?.default_reason ? h("span", { class: "muted" }, ` (${health.default_reason})`) : ""),
        h("td", { "data-label": "Set where" }, "the daemon, from the runtimes this host can use (see Health)"),
      ),
    ],
    "",
  );
  return h(
    "section",
    { class: "settings-part", "aria-labelledby": "network-title" },
    h("h3", { id: "network-title" }, "Network defaults"),
    h(
      "p",
      { class: "muted" },
      "A sandbox created without a network policy gets a mode from the daemon, bounded by the key that makes it. The daemon's default is set when it starts and the API neither reports nor changes it: there is no workspace-wide default.",
    ),
    table,
    h(
      "p",
      { class: "note" },
      "Whatever the mode, the host (the daemon's API too), loopback, private ranges, link-local and cloud metadata addresses, CGNAT and every other sandbox are refused, also through names that resolve to them.",
    ),
  );
}

/** Sandbox modes: the tool-call and network modes a key bounds, with the
 * signed-in key's own. */
function modesSection(who: Caller): HTMLElement {
  const { table, fill } = listTable("Sandbox modes", ["Kind", "Mode", "What it does", "This key"]);
  const rows = (kind: string, modes: [string, string][], own: string | undefined) =>
    modes.map(([mode, what]) => {
      const use = mayUse(modes, own, mode, who.admin);
      return h(
        "tr",
        { class: use === "its mode" ? "own" : "" },
        h("td", { "data-label": "Kind" }, kind),
        h("td", { "data-label": "Mode" }, h("code", {}, mode)),
        h("td", { "data-label": "What it does" }, what),
        h("td", { "data-label": "This key", class: `use ${use.replace(" ", "-")}` }, use),
      );
    });
  fill([...rows("Tool calls", toolsModes, who.tools_mode), ...rows("Network", networkModes, who.network_mode)], "");
  const section = h(
    "section",
    { class: "settings-part", "aria-labelledby": "modes-title" },
    h("h3", { id: "modes-title" }, "Sandbox modes"),
    h(
      "p",
      { class: "muted" },
      "Each API key has two modes, listed most isolated first: the least isolated mode its tool calls may run in, and the least isolated network its sandboxes may have. What names no mode gets the key's; a more isolated one may be asked for, a less isolated one is refused (permission_denied). A key makes keys with its own modes or more isolated ones only. Set them when making a key, on the Keys page.",
    ),
    h("p", { id: "settings-who" }, signedInAs(who)),
    table,
  );
  return section;
}

export function settingsPanel(client: Hutch): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", class: "muted", id: "settings-status" }, "Loading…");
  const panel = h("section", { class: "settings", "aria-label": "Settings" }, status);
  let timer: number | undefined;
  let closed = false;
  void (async () => {
    let who: Caller;
    let health: Health | undefined;
    try {
      [who, health] = await Promise.all([whoAmI(client), client.health().catch(() => undefined)]);
    } catch (err) {
      status.textContent = message(err);
      return;
    }
    if (closed) return;
    const quota = quotaSection(client, who);
    status.textContent = "";
    panel.append(quota.section, networkSection(who, health), modesSection(who));
    await quota.refresh();
    // Usage moves as sandboxes start and stop: it is read again while
    // the page is open.
    if (!closed) timer = window.setInterval(quota.refresh, 10_000);
  })();
  return {
    panel,
    close: () => {
      closed = true;
      if (timer !== undefined) clearInterval(timer);
    },
  };
}

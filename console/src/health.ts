// The daemon's health: its version, the runtimes this host can use (and why
// not, when it cannot), which one new sandboxes get, the warm pools, and
// the sandboxes still being torn down; for the daemon's own key also the
// data dir's disk and the daemon's recent warnings and errors, which the
// API gives no other key (they may name any workspace's sandboxes), and
// the cluster's nodes (GET /v1/nodes: a single box is its one node; a
// key's 403 hides them). It is read again every 5 s while the page is
// open.

import { HutchError, type ClusterNode, type Health, type Hutch } from "../../sdk/typescript/src/index";
import { age, h, listTable, message, poll } from "./dom";
import "./health.css";

/** How often the page reads the daemon's health again. */
const refreshMs = 5_000;

type Backend = Health["backends"][number];
type Pool = Health["pools"][number];
type LogRecord = NonNullable<Health["recent_errors"]>[number];

function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/** A table cell that says what it is when style.css stacks the cells of a
 * narrow screen (the column headings are hidden then). */
function cell(label: string, ...content: (Node | string)[]): HTMLTableCellElement {
  return h("td", { "data-label": label }, ...content);
}

function backendRow(b: Backend): HTMLElement {
  return h(
    "tr",
    {},
    h("th", { scope: "row" }, b.name),
    cell("Usable", h("span", { class: b.usable ? "usable yes" : "usable no" }, b.usable ? "usable" : "not usable")),
    cell("Version", b.version || "unknown"),
    cell("Binary", h("code", {}, b.binary)),
    cell("Why not", b.usable ? "" : b.reason),
  );
}

function poolRow(p: Pool): HTMLElement {
  return h(
    "tr",
    {},
    cell("Template", p.template),
    cell("Runtime", p.runtime),
    cell("Ready", h("span", { "aria-label": `${p.ready} of ${p.size} ready` }, `${p.ready}/${p.size}`)),
  );
}

/** Committed of total: "1.5 of 8". */
function committed(used: number, total: number, unit = ""): string {
  const n = (v: number) => String(Math.round(v * 10) / 10);
  return `${n(used)} of ${n(total)}${unit}`;
}

function nodeRow(n: ClusterNode): HTMLElement {
  const templates = Object.keys(n.templates).sort();
  const warm = Object.entries(n.warm).map(([pool, ready]) => `${pool}: ${ready}`);
  return h(
    "tr",
    {},
    h("th", { scope: "row" }, n.id),
    cell("Role", n.role),
    cell(
      "State",
      h("span", { class: n.state === "up" ? "usable yes" : "usable no" }, n.state),
      ...(n.reason ? [h("div", { class: "muted" }, n.reason)] : []),
    ),
    cell("Address", h("code", {}, n.url)),
    cell("Last heartbeat", h("time", { datetime: n.heartbeat_at, title: n.heartbeat_at }, `${age(n.heartbeat_at)} ago`)),
    cell("CPUs", committed(n.committed_cpus, n.cpus)),
    cell("Memory", committed(n.committed_memory_mb / 1024, n.memory_mb / 1024, " GiB")),
    cell("Sandboxes", String(n.sandboxes)),
    cell("Templates", h("span", { title: templates.join(", ") }, String(templates.length))),
    cell("Warm", warm.join(", ") || "none"),
    cell("Version", n.version),
  );
}

function errorRow(r: LogRecord): HTMLElement {
  const when = new Date(r.time);
  const attrs = Object.entries(r.attrs).map(([k, v]) => h("li", {}, h("span", { class: "key" }, k), "=", v));
  return h(
    "tr",
    {},
    cell("Time", h("time", { datetime: r.time, title: r.time }, when.toLocaleString())),
    cell("Level", h("span", { class: `level ${r.level.toLowerCase()}` }, r.level)),
    cell("Message", r.message),
    cell("Attributes", attrs.length ? h("ul", { class: "attrs" }, ...attrs) : ""),
  );
}

/** The data dir's disk: free of total, and a bar of what is used. */
function diskView(d: NonNullable<Health["disk"]>): HTMLElement[] {
  const used = d.total_bytes - d.free_bytes;
  const share = d.total_bytes ? used / d.total_bytes : 0;
  const fill = h("span", { class: "fill" });
  fill.style.width = `${Math.min(100, share * 100)}%`;
  const bar = h(
    "div",
    {
      class: share >= 0.95 ? "disk-bar full" : share >= 0.8 ? "disk-bar high" : "disk-bar",
      role: "meter",
      "aria-valuemin": "0",
      "aria-valuemax": String(d.total_bytes),
      "aria-valuenow": String(used),
      "aria-label": `Disk used: ${gib(used)} of ${gib(d.total_bytes)}`,
    },
    fill,
  );
  return [
    h("p", {}, h("strong", {}, `${gib(d.free_bytes)} free`), ` of ${gib(d.total_bytes)}, on the filesystem of the data dir `, h("code", {}, d.path), "."),
    h("div", { class: "disk-row" }, bar, h("span", { class: "share" }, `${Math.round(share * 100)} % used`)),
    h("p", { class: "muted" }, "Templates, sandboxes' writable layers and volumes all take their space from it."),
  ];
}

/** A part of the page: a heading and what is under it. */
function part(id: string, title: string, ...content: Node[]): HTMLElement {
  return h("section", { class: "health-part", "aria-labelledby": id }, h("h3", { id }, title), ...content);
}

export function healthPanel(client: Hutch): { panel: HTMLElement; close: () => void } {
  const updated = h("p", { class: "muted", id: "health-updated" }, "Loading…");
  const failure = h("p", { role: "alert", class: "error-text" });

  const daemon = h("dl", { class: "facts" });
  const runtimes = listTable("Runtimes", ["Runtime", "Usable", "Version", "Binary", "Why not"]);
  const defaultRuntime = h("p", { id: "health-default" });
  const pools = listTable("Warm pools", ["Template", "Runtime", "Ready"]);
  const disk = h("div", {});
  const errors = listTable("Recent errors", ["Time", "Level", "Message", "Attributes"]);
  const errorsBody = h("div", {}, errors.table);
  const nodes = listTable("Nodes", ["Node", "Role", "State", "Address", "Last heartbeat", "CPUs", "Memory", "Sandboxes", "Templates", "Warm", "Version"]);
  const nodesFailure = h("p", { role: "alert", class: "error-text" });
  const nodesPart = part(
    "health-nodes",
    "Nodes",
    h("p", { class: "muted" }, "The daemons that run sandboxes, as each last told (a single box is its one node): CPUs and memory are what their sandboxes' limits commit of the machine's."),
    nodesFailure,
    nodes.table,
  );
  const raw = h("pre", { class: "output", "aria-label": "The daemon's answer" });

  const panel = h(
    "section",
    { class: "health", "aria-label": "Health" },
    updated,
    failure,
    part("health-daemon", "Daemon", daemon),
    part("health-runtimes", "Runtimes", defaultRuntime, runtimes.table),
    part(
      "health-pools",
      "Warm pools",
      h("p", { class: "muted" }, "Sandboxes made ahead of time: a create of a pool's template and runtime with the default limits takes one, and the pool refills."),
      pools.table,
    ),
    nodesPart,
    part("health-disk", "Disk", disk),
    part("health-errors", "Recent errors", h("p", { class: "muted" }, "The daemon's latest warnings and errors, newest first."), errorsBody),
    // The answer as it came, to copy into a bug report.
    h("details", { class: "health-part" }, h("summary", {}, "The daemon's answer as JSON"), raw),
  );

  const show = (health: Health) => {
    daemon.replaceChildren(
      h("dt", {}, "Status"),
      h("dd", {}, health.status),
      h("dt", {}, "Version"),
      h("dd", {}, health.version),
      h("dt", {}, "Being deleted"),
      h("dd", {}, health.deleting === 1 ? "1 sandbox still being torn down" : `${health.deleting} sandboxes still being torn down`),
      h("dt", {}, "Goroutines"),
      h("dd", {}, String(health.goroutines)),
    );
    defaultRuntime.replaceChildren(
      "New sandboxes that name no runtime get ",
      h("strong", {}, health.default_runtime),
      health.default_reason ? `: ${health.default_reason}` : ".",
    );
    runtimes.fill(health.backends.map(backendRow), "No runtimes.");
    pools.fill(health.pools.map(poolRow), "No warm pools.");
    if (health.disk) disk.replaceChildren(...diskView(health.disk));
    else disk.replaceChildren(h("p", { class: "muted" }, "Only the daemon's own key is told the disk's space."));
    if (health.recent_errors) {
      errors.fill([...health.recent_errors].reverse().map(errorRow), "none");
      if (!errorsBody.contains(errors.table)) errorsBody.replaceChildren(errors.table);
    } else {
      errorsBody.replaceChildren(
        h("p", { class: "muted" }, "Only the daemon's own key is told the daemon's recent errors: they may name any workspace's sandboxes."),
      );
    }
    raw.textContent = JSON.stringify(health, null, 2);
  };

  // The nodes are the daemon's own key's: another key's 403 hides them,
  // and they are not asked for again.
  let nodesForbidden = false;
  const readNodes = async (alive: () => boolean) => {
    if (nodesForbidden) return;
    try {
      const list = await client.listNodes();
      if (!alive()) return;
      nodes.fill(list.map(nodeRow), "No nodes.");
      nodesFailure.textContent = "";
    } catch (err) {
      if (!alive()) return;
      if (err instanceof HutchError && err.status === 403) {
        nodesForbidden = true;
        nodesPart.hidden = true;
        return;
      }
      const text = `The nodes could not be read: ${message(err)}`;
      if (nodesFailure.textContent !== text) nodesFailure.textContent = text;
    }
  };

  const stop = poll(refreshMs, async (alive) => {
    const nodesRead = readNodes(alive);
    try {
      const health = await client.health();
      if (!alive()) return;
      show(health);
      failure.textContent = "";
      updated.textContent = `Updated at ${new Date().toLocaleTimeString()}; read again every ${refreshMs / 1000} s.`;
    } catch (err) {
      if (!alive()) return;
      // Said once, not again on every failed refresh.
      const text = `The daemon's health could not be read: ${message(err)}`;
      if (failure.textContent !== text) failure.textContent = text;
    } finally {
      await nodesRead;
    }
  });
  return { panel, close: stop };
}

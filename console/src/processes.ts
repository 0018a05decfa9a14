// A sandbox's background processes: start one (a name and a shell
// command), watch their status, signal, stop or forget them, and follow
// one's log as it is written. The API gives a process's status and pid
// but not its exit code: the log shows how it ended.

import type { Hutch, Process } from "../../sdk/typescript/src/index";
import { actionButton, h, listTable, message, poll, select } from "./dom";
import { followLogs } from "./logs";

const SIGNALS = ["TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2"];

// A row of the list, kept from one refresh to the next so that a button
// keeps its focus while the list refreshes under it.
interface Row {
  tr: HTMLTableRowElement;
  pid: HTMLElement;
  status: HTMLElement;
  running: HTMLButtonElement[];
}

export function processesPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const name = h("input", { id: "process-name", name: "process-name", placeholder: "worker", pattern: "[A-Za-z0-9][A-Za-z0-9._\\-]{0,62}" });
  const command = h("input", { id: "process-command", name: "process-command", required: "", size: "36", placeholder: "python3 worker.py" });
  const form = h(
    "form",
    { class: "row", "aria-label": "Start a process" },
    h("label", { for: "process-name" }, "Process name", name),
    h("label", { for: "process-command" }, "Process command", command),
    h("button", { type: "submit" }, "Start process"),
  );
  const signal = select("process-signal", SIGNALS);
  const status = h("p", { role: "status", class: "muted", id: "processes-status" });
  const { table, fill } = listTable("Processes", ["Name", "PID", "Status", "Command", "Actions"]);
  const logTitle = h("h4", {});
  const logBox = h("div", { class: "log-pane", hidden: "" });
  const rows = new Map<string, Row>();
  // shown is the names the table shows, in order.
  let shown: string | undefined;
  let logs: { panel: HTMLElement; close: () => void } | undefined;
  let closed = false;

  // show follows name's log in the pane, ending the one followed before.
  function show(name: string) {
    logs?.close();
    logs = followLogs(client, id, name);
    logTitle.textContent = `Log of ${name}`;
    const hide = h("button", { type: "button", "aria-label": `Close the log of ${name}` }, "Close");
    hide.addEventListener("click", () => {
      logs?.close();
      logs = undefined;
      logBox.hidden = true;
      logBox.replaceChildren();
    });
    logBox.replaceChildren(h("div", { class: "row" }, logTitle, hide), logs.panel);
    logBox.hidden = false;
  }

  function row(p: Process): Row {
    const actions = h("td", { class: "actions" });
    const button = (text: string, label: string, fn: () => unknown, cls = "") =>
      actions.appendChild(actionButton(text, `${label} ${p.name}`, fn, status, refresh, cls));
    // Named apart from the services panel's buttons: a service is a
    // process too, so it is listed in both.
    button("Logs", "Logs of process", () => show(p.name));
    const running = [
      button("Signal", "Signal process", async () => {
        await client.signalProcess(id, p.name, signal.value);
        status.textContent = `Sent ${signal.value} to ${p.name}.`;
      }),
      button("Stop", "Stop process", async () => {
        await client.signalProcess(id, p.name, "TERM");
        status.textContent = `Stopped ${p.name}.`;
      }),
    ];
    button(
      "Delete",
      "Delete process",
      async () => {
        await client.deleteProcess(id, p.name);
        status.textContent = `Deleted ${p.name}.`;
      },
      "danger",
    );
    const pid = h("td", {});
    const state = h("td", { class: "state" });
    const cmd = h("td", { class: "cmd" }, h("code", {}, p.cmd.join(" ")));
    return { tr: h("tr", {}, h("td", {}, p.name), pid, state, cmd, actions), pid, status: state, running };
  }

  function update(r: Row, p: Process) {
    r.pid.textContent = p.pid ? String(p.pid) : "";
    r.status.textContent = p.status;
    r.status.className = `state ${p.status}`;
    for (const b of r.running) b.disabled = p.status !== "running";
  }

  async function refresh() {
    // A button's refresh may come after the view was left.
    if (closed) return;
    try {
      const list = await client.listProcesses(id);
      if (closed) return;
      const names = list.map((p) => p.name);
      for (const n of rows.keys()) if (!names.includes(n)) rows.delete(n);
      for (const p of list) {
        let r = rows.get(p.name);
        if (!r) rows.set(p.name, (r = row(p)));
        update(r, p);
      }
      // The rows are put in again only when the list changed, so that
      // a refresh leaves the focus where it was.
      if (shown === undefined || names.join("\n") !== shown) fill(names.map((n) => rows.get(n)!.tr), "No background processes.");
      shown = names.join("\n");
    } catch (err) {
      status.textContent = message(err);
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const p = await client.startProcess(id, command.value, { name: name.value.trim() || undefined });
      status.textContent = `Started ${p.name}.`;
      await refresh();
      show(p.name);
    } catch (err) {
      status.textContent = message(err);
    }
  });

  const stop = poll(2000, refresh);
  const panel = h(
    "section",
    { "aria-label": "Processes" },
    h("h3", {}, "Background processes"),
    form,
    status,
    h("div", { class: "row" }, h("label", { for: "process-signal" }, "Signal to send", signal)),
    table,
    logBox,
  );
  return {
    panel,
    close: () => {
      closed = true;
      stop();
      logs?.close();
    },
  };
}

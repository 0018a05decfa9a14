// A sandbox's services: start one (a command and the port it listens on),
// watch their status, and preview one in a frame. The frame loads the
// service's link by host ({port}-{id}.localhost), another origin than the
// console's, so the page it shows cannot reach the console or its key;
// the link's first visit sets the cookie a framed preview needs.

import type { Hutch, Service } from "../../sdk/typescript/src/index";
import { actionButton, h, listTable, message, poll } from "./dom";
import { followLogs } from "./logs";
import { regionShot } from "./regionshot";

export function servicesPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const name = h("input", { id: "service-name", name: "service-name", placeholder: "web" });
  const command = h("input", { id: "service-command", name: "service-command", required: "", size: "36", placeholder: "python3 -m http.server 8000" });
  const port = h("input", { id: "service-port", name: "service-port", type: "number", min: "1", max: "65535", required: "", value: "8000" });
  const status = h("p", { role: "status", class: "muted", id: "services-status" });
  const { table, fill } = listTable("Services", ["Name", "Port", "Status", "Actions"]);
  const pane = h("div", { class: "preview", hidden: "" });
  const paneTitle = h("p", { class: "muted", id: "preview-status" });
  const frame = h("iframe", {
    title: "Preview",
    // Its own origin (a host of its own) is not the console's; the sandbox
    // attribute keeps it from navigating the console or opening dialogs.
    sandbox: "allow-scripts allow-forms allow-same-origin allow-popups allow-downloads",
    referrerpolicy: "no-referrer",
  });
  const reload = h("button", { type: "button" }, "Reload");
  const newTab = h("a", { target: "_blank", rel: "noopener noreferrer" }, "Open in a new tab");
  let previewing = "";
  // One service's log is followed at a time, below the list.
  const logBox = h("div", { class: "service-log" });
  let logs: { name: string; close: () => void } | undefined;
  const showLogs = (name: string) => {
    logs?.close();
    const view = followLogs(client, id, name);
    logs = { name, close: view.close };
    logBox.replaceChildren(h("h4", {}, `Log of ${name}`), view.panel);
  };
  const form = h(
    "form",
    { class: "row", "aria-label": "Start a service" },
    h("label", { for: "service-name" }, "Service name", name),
    h("label", { for: "service-command" }, "Service command", command),
    h("label", { for: "service-port" }, "Service port", port),
    h("button", { type: "submit" }, "Start service"),
  );

  // The frame loads once the service answers: a preview asked for while
  // it starts waits for its status to turn running (up to 30 s).
  async function running(name: string): Promise<Service> {
    for (let i = 0; ; i++) {
      const svc = await client.getService(id, name);
      paneTitle.textContent = `${svc.name}: ${svc.status}`;
      if (svc.status === "running" || i >= 150) return svc;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function preview(svc: Service) {
    try {
      pane.hidden = false;
      previewing = svc.name;
      svc = await running(svc.name);
      const link = await client.serviceLink(id, svc.name);
      if (!link.url.startsWith("http")) throw new Error("this daemon serves previews by path only: open it in a new tab");
      frame.src = link.url;
      newTab.setAttribute("href", link.url);
    } catch (err) {
      status.textContent = message(err);
    }
  }

  const row = (svc: Service) => {
    const actions = h("td", { class: "actions" });
    const button = (text: string, fn: () => unknown, cls = "") => actions.append(actionButton(text, `${text} ${svc.name}`, fn, status, refresh, cls));
    button("Preview", () => preview(svc));
    button("Logs", () => showLogs(svc.name));
    button("Restart", () => client.serviceAction(id, svc.name, "restart"));
    button("Stop", () => client.serviceAction(id, svc.name, "stop"));
    button("Delete", () => client.deleteService(id, svc.name), "danger");
    return h("tr", {}, h("td", {}, svc.name), h("td", {}, String(svc.port ?? "")), h("td", { class: `state ${svc.status}` }, svc.status ?? ""), actions);
  };

  async function refresh() {
    try {
      const list = await client.listServices(id);
      fill(list.map(row), "No services yet.");
      const shown = list.find((s) => s.name === previewing);
      if (shown) paneTitle.textContent = `${shown.name}: ${shown.status}`;
    } catch (err) {
      status.textContent = message(err);
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const svc = await client.startService(id, command.value, Number(port.value), { name: name.value.trim() || undefined });
      status.textContent = `Started ${svc.name}.`;
      await refresh();
    } catch (err) {
      status.textContent = message(err);
    }
  });
  // Reload is a restart: the service's command runs again, then the frame
  // loads it afresh.
  reload.addEventListener("click", async () => {
    try {
      await client.serviceAction(id, previewing, "restart");
      await running(previewing);
      frame.src = frame.src;
    } catch (err) {
      status.textContent = message(err);
    }
  });

  const stop = poll(2000, refresh);
  const panel = h(
    "section",
    { "aria-label": "Services" },
    h("h3", {}, "Services"),
    form,
    status,
    table,
    logBox,
    h("div", {}, pane),
  );
  const stage = h("div", { class: "stage" }, frame);
  pane.append(h("div", { class: "row" }, paneTitle, reload, newTab, regionShot(client, id, stage, frame, () => previewing)), stage);
  return {
    panel,
    close: () => {
      stop();
      logs?.close();
    },
  };
}

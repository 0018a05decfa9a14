// API keys: listed (name, workspace, modes, age), made (the key shown once,
// at its making: the daemon keeps only its hash), and removed.

import type { APIKey, Hutch } from "../../sdk/typescript/src/index";
import { h, listTable, message } from "./dom";

export function keysPanel(client: Hutch): HTMLElement {
  const name = h("input", { id: "key-name", name: "key-name", required: "", placeholder: "my-app" });
  const workspace = h("input", { id: "key-workspace", name: "key-workspace", placeholder: "default" });
  const status = h("p", { role: "status", class: "muted", id: "keys-status" });
  const shown = h("div", { class: "once", hidden: "" });
  const { table, fill } = listTable("API keys", ["Name", "Workspace", "Tools mode", "Network mode", ""]);
  const form = h(
    "form",
    { class: "row", "aria-label": "Make an API key" },
    h("label", { for: "key-name" }, "Key name", name),
    h("label", { for: "key-workspace" }, "Workspace", workspace),
    h("button", { type: "submit", class: "primary" }, "Make key"),
  );
  const refresh = async () => {
    try {
      const list = await client.listKeys();
      fill(list.map(row), "No keys yet.");
    } catch (err) {
      status.textContent = message(err);
    }
  };
  const row = (k: APIKey) => {
    const del = h("button", { type: "button", class: "danger", "aria-label": `Delete key ${k.name}` }, "Delete");
    del.addEventListener("click", async () => {
      try {
        await client.deleteKey(k.name);
        status.textContent = `Deleted ${k.name}.`;
      } catch (err) {
        status.textContent = message(err);
      }
      await refresh();
    });
    return h("tr", {}, h("td", {}, k.name), h("td", {}, k.workspace), h("td", {}, k.tools_mode), h("td", {}, k.network_mode ?? ""), h("td", { class: "actions" }, del));
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const k = await client.createKey({ name: name.value.trim(), workspace: workspace.value.trim() || undefined });
      const field = h("input", { readonly: "", value: k.key ?? "", "aria-label": `The key ${k.name}`, size: "72" });
      shown.replaceChildren(h("p", {}, `The key ${k.name}, shown this once: copy it now.`), field);
      shown.hidden = false;
      field.select();
      form.reset();
      status.textContent = `Made ${k.name}.`;
    } catch (err) {
      status.textContent = message(err);
    }
    await refresh();
  });
  void refresh();
  return h(
    "section",
    { "aria-label": "API keys" },
    h("p", { class: "muted" }, "A key acts in its workspace and sees only its sandboxes; the daemon's own key sees all."),
    form,
    shown,
    status,
    table,
  );
}

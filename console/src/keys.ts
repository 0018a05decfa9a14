// API keys: listed (name, workspace, modes, age), made (the key shown once,
// at its making: the daemon keeps only its hash), and removed.
//
// A key carries two modes, each the least isolated it allows: where its
// tool calls run (tools_mode) and what network its sandboxes may have
// (network_mode). Left to the default, the daemon's own key makes keys of
// all and full, and another key makes keys with its own modes; a key may
// not make one less isolated than itself (permission_denied).

import type { APIKey, Hutch } from "../../sdk/typescript/src/index";
import { age, h, listTable, message, select } from "./dom";
import "./settings.css";

// The SDK's createKey takes no network_mode yet, though the API does: the
// request is passed through as its body.
type CreateRequest = Parameters<Hutch["createKey"]>[0] & { network_mode?: string };

export function keysPanel(client: Hutch): HTMLElement {
  const name = h("input", { id: "key-name", name: "key-name", required: "", placeholder: "my-app" });
  const workspace = h("input", { id: "key-workspace", name: "key-workspace", placeholder: "default" });
  const described = { "aria-describedby": "key-modes-hint" };
  const tools = select("key-tools-mode", ["", "all", "selective", "off"], "default", described);
  const network = select("key-network-mode", ["", "none", "allowlist", "full"], "default", described);
  const status = h("p", { role: "status", class: "muted", id: "keys-status" });
  const shown = h("div", { class: "once", hidden: "" });
  const { table, fill } = listTable("API keys", ["Name", "Workspace", "Tools mode", "Network mode", "Made", ""]);
  const form = h(
    "form",
    { class: "row", "aria-label": "Make an API key" },
    h("label", { for: "key-name" }, "Key name", name),
    h("label", { for: "key-workspace" }, "Workspace", workspace),
    h("label", { for: "key-tools-mode" }, "Tools mode", tools),
    h("label", { for: "key-network-mode" }, "Network mode", network),
    h("button", { type: "submit", class: "primary" }, "Make key"),
  );
  const hint = h(
    "div",
    { class: "hint", id: "key-modes-hint" },
    h(
      "p",
      {},
      "Tools mode, the least isolated place its tool calls may run: all (every call in a sandbox), selective (risky calls in a sandbox, the rest on the host) or off (all on the host). ",
      "Network mode, the most its sandboxes may reach: none (loopback only), allowlist (only what a sandbox's policy allows) or full (the public internet). ",
      "What a call or sandbox names no mode for gets the key's; more isolated ones may be asked for. Default: all and full, or for a key made by another key, that key's own. See Settings for more.",
    ),
  );
  const refresh = async () => {
    try {
      const list = await client.listKeys();
      list.sort((a, b) => a.workspace.localeCompare(b.workspace) || a.name.localeCompare(b.name));
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
    return h(
      "tr",
      {},
      h("td", {}, k.name),
      h("td", { "data-label": "Workspace" }, k.workspace),
      h("td", { "data-label": "Tools mode" }, k.tools_mode),
      h("td", { "data-label": "Network mode" }, k.network_mode ?? "full"),
      h("td", { "data-label": "Made" }, age(k.created_at)),
      h("td", { class: "actions" }, del),
    );
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const req: CreateRequest = {
      name: name.value.trim(),
      workspace: workspace.value.trim() || undefined,
      tools_mode: tools.value || undefined,
      network_mode: network.value || undefined,
    };
    try {
      const k = await client.createKey(req);
      const field = h("input", { readonly: "", value: k.key ?? "", "aria-label": `The key ${k.name}`, size: "72" });
      shown.replaceChildren(
        h("p", {}, `The key ${k.name}, shown this once: copy it now.`),
        field,
        h("p", { class: "muted" }, `Workspace ${k.workspace}, tools mode ${k.tools_mode}, network mode ${k.network_mode ?? "full"}.`),
      );
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
    { class: "labelled-cells", "aria-label": "API keys" },
    h("p", { class: "muted" }, "A key acts in its workspace and sees only its sandboxes; the daemon's own key sees all."),
    form,
    hint,
    shown,
    status,
    table,
  );
}

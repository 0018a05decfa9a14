// Secrets: listed by name, scope and description, set and deleted; a
// value is written once and never shown again (the API never returns it).

import type { Hutch, Secret } from "../../sdk/typescript/src/index";
import { h, listTable, message } from "./dom";

export function secretsPanel(client: Hutch): HTMLElement {
  const name = h("input", { id: "secret-name", name: "secret-name", required: "", pattern: "[A-Za-z_][A-Za-z0-9_]*", placeholder: "GITHUB_TOKEN" });
  const value = h("input", { id: "secret-value", name: "secret-value", type: "password", required: "", autocomplete: "off" });
  const scope = h("select", { id: "secret-scope", name: "secret-scope" }, h("option", { value: "workspace" }, "workspace"), h("option", { value: "user" }, "personal"));
  const description = h("input", { id: "secret-description", name: "secret-description" });
  const status = h("p", { role: "status", class: "muted", id: "secrets-status" });
  const { table, fill } = listTable("Secrets", ["Name", "Scope", "Description", "Value", ""]);
  const form = h(
    "form",
    { class: "row", "aria-label": "Set a secret" },
    h("label", { for: "secret-name" }, "Name", name),
    h("label", { for: "secret-value" }, "Value", value),
    h("label", { for: "secret-scope" }, "Scope", scope),
    h("label", { for: "secret-description" }, "Description", description),
    h("button", { type: "submit", class: "primary" }, "Set secret"),
  );
  const refresh = async () => {
    try {
      const list = await client.listSecrets();
      fill(list.map(row), "No secrets yet.");
    } catch (err) {
      status.textContent = message(err);
    }
  };
  const row = (s: Secret) => {
    const del = h("button", { type: "button", class: "danger", "aria-label": `Delete secret ${s.name}` }, "Delete");
    del.addEventListener("click", async () => {
      try {
        await client.deleteSecret(s.name, { scope: s.scope, user: s.user || undefined });
        status.textContent = `Deleted ${s.name}.`;
      } catch (err) {
        status.textContent = message(err);
      }
      await refresh();
    });
    return h(
      "tr",
      {},
      h("td", {}, s.name),
      h("td", {}, s.scope === "user" ? `personal (${s.user})` : "workspace"),
      h("td", {}, s.description ?? ""),
      h("td", { class: "muted" }, "value hidden"),
      h("td", { class: "actions" }, del),
    );
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const s = await client.setSecret({
        name: name.value.trim(),
        value: value.value,
        scope: scope.value as "workspace" | "user",
        description: description.value.trim() || undefined,
      });
      status.textContent = `Set ${s.name}. Its value is not shown again.`;
      form.reset();
    } catch (err) {
      status.textContent = message(err);
    }
    value.value = "";
    await refresh();
  });
  void refresh();
  return h(
    "section",
    { "aria-label": "Secrets" },
    h("p", { class: "muted" }, "Commands in the workspace's sandboxes get them as variables. Values are write-only."),
    form,
    status,
    table,
  );
}

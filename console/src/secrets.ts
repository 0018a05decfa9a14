// Secrets: listed by name, scope, injection and description, set and
// deleted; a value is written once and never shown again (the API never
// returns it, and the form's field is emptied after every set).
//
// A workspace secret goes to every command of the workspace's sandboxes; a
// personal one belongs to one of the product's users and goes to the
// sandboxes made for that user, over a workspace secret of the same name.
// The console names the user in the request's body when it sets or
// deletes one; to list a user's personal secrets a key must send the
// Hutch-User header (the daemon's own key lists everyone's), which the SDK
// does not send, so that listing goes through settings.ts's call.

import type { Hutch, Secret } from "../../sdk/typescript/src/index";
import { h, listTable, message } from "./dom";
import "./settings.css";

type SetRequest = Parameters<Hutch["setSecret"]>[0] & { query?: boolean };

export function secretsPanel(client: Hutch): HTMLElement {
  const name = h("input", { id: "secret-name", name: "secret-name", required: "", pattern: "[A-Za-z_][A-Za-z0-9_]*", placeholder: "GITHUB_TOKEN", spellcheck: "false" });
  const value = h("input", { id: "secret-value", name: "secret-value", type: "password", required: "", autocomplete: "new-password", spellcheck: "false" });
  const scope = h(
    "select",
    { id: "secret-scope", name: "secret-scope", "aria-describedby": "secret-scope-hint" },
    h("option", { value: "workspace" }, "Workspace: every user"),
    h("option", { value: "user" }, "Personal: one user"),
  );
  const user = h("input", { id: "secret-user", name: "secret-user", placeholder: "alice", pattern: "[A-Za-z0-9][A-Za-z0-9._@+\\-]{0,127}", spellcheck: "false", "aria-describedby": "secret-scope-hint" });
  const inject = h(
    "select",
    { id: "secret-inject", name: "secret-inject", "aria-describedby": "secret-inject-hint" },
    h("option", { value: "env" }, "Environment variable"),
    h("option", { value: "proxy" }, "Placeholder, swapped by the proxy"),
  );
  const hosts = h("input", { id: "secret-hosts", name: "secret-hosts", placeholder: "api.example.com, *.example.com", spellcheck: "false" });
  const query = h("input", { id: "secret-query", name: "secret-query", type: "checkbox" });
  const description = h("input", { id: "secret-description", name: "secret-description" });
  const status = h("p", { role: "status", class: "muted", id: "secrets-status" });
  const { table, fill } = listTable("Secrets", ["Name", "Scope", "Injected", "Workspace", "Description", "Value", ""]);
  const hostsLabel = h("label", { for: "secret-hosts", hidden: "" }, "Hosts", hosts);
  const queryLabel = h("label", { for: "secret-query", class: "check", hidden: "" }, query, "Also in query strings");
  const form = h(
    "form",
    { class: "row", "aria-label": "Set a secret" },
    h("label", { for: "secret-name" }, "Name", name),
    h("label", { for: "secret-value" }, "Value", value),
    h("label", { for: "secret-scope" }, "Scope", scope),
    h("label", { for: "secret-user" }, "User", user),
    h("label", { for: "secret-inject" }, "Inject as", inject),
    hostsLabel,
    queryLabel,
    h("label", { for: "secret-description" }, "Description", description),
    h("button", { type: "submit", class: "primary" }, "Set secret"),
  );
  const hints = h(
    "div",
    { class: "hint" },
    h(
      "p",
      { id: "secret-scope-hint" },
      "Workspace: every command of the workspace's sandboxes gets it. Personal: only the sandboxes made for that user (named as the user when created) get it, over a workspace secret of the same name. The list shows the personal secrets of the user named here (the daemon's own key sees everyone's).",
    ),
    h(
      "p",
      { id: "secret-inject-hint" },
      "Environment variable: commands get the value itself. Placeholder: commands get a placeholder, which the daemon's egress proxy swaps for the value only in requests to the hosts given, so the value never enters the sandbox.",
    ),
  );
  const proxied = () => {
    const on = inject.value === "proxy";
    hostsLabel.hidden = queryLabel.hidden = !on;
    hosts.required = on;
  };
  const personal = () => (user.required = scope.value === "user");
  inject.addEventListener("change", proxied);
  scope.addEventListener("change", personal);

  const refresh = async () => {
    const who = user.value.trim();
    try {
      const list = who
        ? await client.withUser(who).listSecrets()
        : await client.listSecrets();
      list.sort((a, b) => a.workspace.localeCompare(b.workspace) || a.scope.localeCompare(b.scope) || (a.user ?? "").localeCompare(b.user ?? "") || a.name.localeCompare(b.name));
      fill(list.map(row), who ? `No secrets of this workspace or of ${who}.` : "No secrets yet.");
    } catch (err) {
      status.textContent = message(err);
    }
  };
  user.addEventListener("change", () => void refresh());

  const row = (s: Secret) => {
    const mine = s.scope === "user";
    const label = mine ? `Delete secret ${s.name} of ${s.user}` : `Delete secret ${s.name}`;
    const del = h("button", { type: "button", class: "danger", "aria-label": label }, "Delete");
    del.addEventListener("click", async () => {
      // The daemon's own key deletes in the workspace its header names
      // (default without one); a key's header must name its own.
      try {
        await client.withWorkspace(s.workspace).deleteSecret(s.name, mine ? { scope: "user", user: s.user } : {});
        status.textContent = mine ? `Deleted ${s.name} of ${s.user}.` : `Deleted ${s.name}.`;
      } catch (err) {
        status.textContent = message(err);
      }
      await refresh();
    });
    const injected =
      s.inject === "proxy"
        ? `placeholder, swapped for ${(s.hosts ?? []).join(", ") || "no host"}${s.query ? " (query strings too)" : ""}`
        : "environment variable";
    return h(
      "tr",
      {},
      h("td", {}, s.name),
      h("td", {}, mine ? h("span", { class: "tag personal" }, `personal: ${s.user}`) : h("span", { class: "tag" }, "workspace")),
      h("td", { "data-label": "Injected" }, injected),
      h("td", { "data-label": "Workspace" }, s.workspace),
      h("td", { "data-label": "Description" }, s.description ?? ""),
      h("td", { class: "muted", "data-label": "Value" }, "write-only"),
      h("td", { class: "actions" }, del),
    );
  };

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const mine = scope.value === "user";
    const req: SetRequest = {
      name: name.value.trim(),
      value: value.value,
      scope: mine ? "user" : "workspace",
      user: mine ? user.value.trim() : undefined,
      description: description.value.trim() || undefined,
      inject: inject.value,
    };
    if (inject.value === "proxy") {
      req.hosts = hosts.value.split(/[\s,]+/).filter(Boolean);
      req.query = query.checked;
    }
    // The value leaves the page with the request and is never put back:
    // the field is emptied whatever the answer.
    value.value = "";
    try {
      const s = await client.setSecret(req);
      const whose = s.scope === "user" ? `personal, for ${s.user}` : `for workspace ${s.workspace}`;
      status.textContent = `Set ${s.name}. It is ${whose}; its value is not shown again.`;
      name.value = description.value = hosts.value = "";
      query.checked = false;
    } catch (err) {
      status.textContent = `${message(err)} Type the value again.`;
    }
    await refresh();
  });
  void refresh();
  return h(
    "section",
    { class: "labelled-cells", "aria-label": "Secrets" },
    h("p", { class: "muted" }, "Commands in the workspace's sandboxes get them as variables. Values are write-only: set, replaced or deleted, never read back."),
    form,
    hints,
    status,
    table,
  );
}

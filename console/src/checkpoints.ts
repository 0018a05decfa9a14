// A sandbox's checkpoints: take one, list them, see what changed since one
// (a file's unified diff on a click), and roll back to one, which restarts
// the sandbox. The list is read again after each action, not polled.

import type { Checkpoint, Hutch } from "../../sdk/typescript/src/index";
import { age, h, listTable, message } from "./dom";

export function checkpointsPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", class: "muted", id: "checkpoints-status" });
  const { table, fill } = listTable("Checkpoints", ["Checkpoint", "Name", "Age", "Size", "Memory", ""]);
  const changes = h("div", { class: "checkpoint-diff", role: "region", "aria-label": "Changes since the checkpoint" });
  const nameInput = h("input", { id: "checkpoint-name", name: "checkpoint-name", placeholder: "before the migration", size: "24" });
  const form = h(
    "form",
    { class: "row", "aria-label": "Take a checkpoint" },
    h("label", { for: "checkpoint-name" }, "Name", nameInput),
    h("button", { type: "submit", class: "primary" }, "Take a checkpoint"),
  );

  const size = (n: number) => (n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

  async function showDiff(cp: Checkpoint) {
    changes.replaceChildren(h("p", { class: "muted" }, `Comparing with ${cp.id}…`));
    try {
      const diff = await client.checkpointDiff(id, cp.id);
      const marks: Record<string, string> = { added: "A", changed: "M", removed: "D" };
      const unified = h("pre", { class: "output", "aria-label": "Unified diff" });
      const list = h(
        "ul",
        { class: "changes", "aria-label": `Changed since ${cp.id}` },
        ...diff.changes.map((c) => {
          const item = h("li", {}, h("code", {}, `${marks[c.kind] ?? "?"} ${c.path}${c.type === "dir" ? "/" : ""}`));
          if (c.type === "file" && c.kind === "changed") {
            const open = h("button", { type: "button", class: "link" }, "diff");
            open.addEventListener("click", async () => {
              try {
                unified.textContent = (await client.checkpointDiff(id, cp.id, c.path)).unified || "(the same)";
              } catch (err) {
                unified.textContent = message(err);
              }
            });
            item.append(" ", open);
          }
          return item;
        }),
      );
      changes.replaceChildren(
        h("h4", {}, `Since ${cp.id}: ${diff.changes.length} change${diff.changes.length === 1 ? "" : "s"}${diff.truncated ? " (the first 10,000)" : ""}`),
        diff.changes.length ? list : h("p", { class: "muted" }, "Nothing changed."),
        unified,
      );
    } catch (err) {
      changes.replaceChildren(h("p", { class: "error-text" }, message(err)));
    }
  }

  async function rollback(cp: Checkpoint) {
    if (!window.confirm(`Roll back to ${cp.id}? The sandbox restarts: what runs in it ends, its files become the checkpoint's.`)) return;
    status.textContent = `Rolling back to ${cp.id}…`;
    try {
      const sb = await client.rollback(id, cp.id, { memory: cp.memory });
      status.textContent = `Rolled back to ${cp.id}: ${sb.state}.`;
      changes.replaceChildren();
    } catch (err) {
      status.textContent = message(err);
    }
  }

  async function refresh() {
    try {
      const all = await client.checkpoints(id);
      fill(
        all
          .slice()
          .reverse()
          .map((cp) => {
            const diff = h("button", { type: "button" }, "Diff");
            diff.addEventListener("click", () => void showDiff(cp));
            const back = h("button", { type: "button" }, "Roll back");
            back.addEventListener("click", () => void rollback(cp));
            return h(
              "tr",
              {},
              h("td", {}, h("code", {}, cp.id)),
              h("td", {}, cp.name ?? ""),
              h("td", {}, h("time", { datetime: cp.created_at }, age(cp.created_at))),
              h("td", {}, size(cp.size_bytes)),
              h("td", {}, cp.memory ? "yes" : "no"),
              h("td", { class: "actions" }, diff, " ", back),
            );
          }),
        "No checkpoints.",
      );
    } catch (err) {
      status.textContent = message(err);
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.textContent = "Taking a checkpoint…";
    try {
      const cp = await client.checkpoint(id, { name: nameInput.value || undefined });
      status.textContent = `Took ${cp.id}.`;
      nameInput.value = "";
      await refresh();
    } catch (err) {
      status.textContent = message(err);
    }
  });
  void refresh();
  const panel = h(
    "section",
    { "aria-label": "Checkpoints" },
    h("h3", {}, "Checkpoints"),
    h("p", { class: "muted" }, "Its files as they were, in milliseconds: compare with them, or roll back (the sandbox restarts)."),
    form,
    table,
    status,
    changes,
  );
  return { panel, close: () => {} };
}

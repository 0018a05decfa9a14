// One sandbox: its terminal, a command run with its output streamed, its
// services with a preview, and its files with an editor. The terminal, the
// editor and the panels load with this view, not with the console.

import type { Hutch } from "../../sdk/typescript/src/index";
import { age, h, message } from "./dom";

export function sandboxPage(c: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const info = h("p", { class: "muted" }, "Loading…");
  const cmd = h("input", { id: "cmd", name: "cmd", value: "uname -a", size: "40" });
  const out = h("pre", { class: "output", "aria-live": "polite", "aria-label": "Output" });
  const form = h("form", { class: "row", "aria-label": "Run a command" }, h("label", { for: "cmd" }, "Command", cmd), h("button", { type: "submit", class: "primary" }, "Run"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    out.replaceChildren();
    try {
      for await (const ev of c.execStream(id, cmd.value)) {
        if (ev.kind === "exit") out.append(h("span", { class: "muted" }, `\n[exit ${ev.exit?.exit_code}]`));
        else out.append(h("span", { class: ev.kind }, ev.text ?? ""));
      }
    } catch (err) {
      out.append(h("span", { class: "stderr" }, message(err)));
    }
  });
  const termStatus = h("p", { role: "status", class: "muted", id: "terminal-status" });
  const termBox = h("div", { class: "terminal", role: "region", "aria-label": "Terminal" });
  // What this view opens, closed when it is left.
  const closers: (() => void)[] = [];
  const openButton = h("button", { type: "button" }, "Open a terminal");
  // The terminal and the editor are loaded with their views: the rest of
  // the console starts without them.
  openButton.addEventListener("click", async () => {
    openButton.remove();
    const { openTerminal } = await import("./terminal");
    closers.push(openTerminal(c, id, termBox, termStatus));
  });
  const servicesBox = h("div");
  void import("./services").then(({ servicesPanel }) => {
    const services = servicesPanel(c, id);
    closers.push(services.close);
    servicesBox.replaceChildren(services.panel);
  });
  const filesBox = h("div");
  void import("./files").then(({ filesPanel }) => {
    const files = filesPanel(c, id);
    closers.push(files.close);
    filesBox.replaceChildren(files.panel);
  });
  c.getSandbox(id).then(
    (sb) => (info.textContent = `${sb.state} · ${sb.runtime} · template ${sb.template} · created ${age(sb.created_at)} ago`),
    (err) => (info.textContent = message(err)),
  );
  const panel = h("div", {}, info, h("h3", {}, "Terminal"), openButton, termBox, termStatus, h("h3", {}, "Run a command"), form, out, servicesBox, filesBox);
  return { panel, close: () => closers.forEach((close) => close()) };
}

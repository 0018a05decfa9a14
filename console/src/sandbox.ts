// One sandbox: what it used over time, its terminal, a command run with
// its output streamed, a scratch pad for code, its background processes,
// its services with a preview, its live desktop, its files with an
// editor, its checkpoints with their diffs and a rollback, the network
// lookups and connections its policy refused, and its settings. The
// terminal, the editor and each panel load with this view, not with the
// console.

import type { Hutch } from "../../sdk/typescript/src/index";
import { age, h, message } from "./dom";
import "./sandbox.css";

type View = { panel: HTMLElement; close: () => void };

export function sandboxPage(c: Hutch, id: string): View {
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
  let closed = false;
  const openButton = h("button", { type: "button" }, "Open a terminal");
  // The terminal and the editor are loaded with their views: the rest of
  // the console starts without them.
  openButton.addEventListener("click", async () => {
    openButton.remove();
    const { openTerminal } = await import("./terminal");
    if (!closed) closers.push(openTerminal(c, id, termBox, termStatus));
  });

  // lazy is a box for the panel load makes once its module has loaded. A
  // panel that loads after the view was left is closed at once, so that
  // its timers do not outlive it.
  function lazy(load: () => Promise<View>): HTMLElement {
    const box = h("div", { class: "lazy" });
    load().then(
      (view) => {
        if (closed) return view.close();
        closers.push(view.close);
        box.replaceChildren(view.panel);
      },
      (err) => box.replaceChildren(h("p", { class: "error-text" }, message(err))),
    );
    return box;
  }

  c.getSandbox(id).then(
    (sb) => (info.textContent = `${sb.state} · ${sb.runtime} · template ${sb.template} · created ${age(sb.created_at)} ago`),
    (err) => (info.textContent = message(err)),
  );
  const panel = h(
    "div",
    { class: "sandbox-page" },
    info,
    lazy(() => import("./stats").then((m) => m.statsPanel(c, id))),
    // Unnamed, so that the one region named Terminal is the terminal's.
    h("section", {}, h("h3", {}, "Terminal"), openButton, termBox, termStatus),
    h("section", {}, h("h3", {}, "Run a command"), form, out),
    lazy(() => import("./code").then((m) => m.codePanel(c, id))),
    lazy(() => import("./processes").then((m) => m.processesPanel(c, id))),
    lazy(() => import("./services").then((m) => m.servicesPanel(c, id))),
    lazy(() => import("./desktop").then((m) => m.desktopPanel(c, id))),
    lazy(() => import("./files").then((m) => m.filesPanel(c, id))),
    lazy(() => import("./checkpoints").then((m) => m.checkpointsPanel(c, id))),
    lazy(() => import("./network").then((m) => m.networkPanel(c, id))),
    lazy(() => import("./sandboxsettings").then((m) => m.sandboxSettings(c, id))),
  );
  return {
    panel,
    close: () => {
      closed = true;
      closers.forEach((close) => close());
    },
  };
}

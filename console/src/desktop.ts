// A sandbox's desktop (template desktop): its live view in a frame of
// another origin (noVNC behind a preview link of the sandbox's), view-only
// unless "Take control" is on, and the last actions an agent sent. The
// panel asks once whether the desktop runs (not waking a suspended
// sandbox); while it shows the desktop it reads the actions every 2 s, as
// the open view itself keeps the sandbox awake.

import type { Desktop, Hutch } from "../../sdk/typescript/src/index";
import { h, message, poll } from "./dom";

export function desktopPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", class: "muted", id: "desktop-status" });
  const start = h("button", { type: "button", hidden: "" }, "Start the desktop");
  const control = h("input", { type: "checkbox", id: "desktop-control", role: "switch" });
  const controlLabel = h("label", { for: "desktop-control", class: "switch" }, control, "Take control");
  const frame = h("iframe", {
    title: "Live desktop",
    // noVNC's page runs in its own origin; it needs scripts and its own
    // origin's WebSocket, nothing of the console's.
    sandbox: "allow-scripts allow-same-origin",
    referrerpolicy: "no-referrer",
    hidden: "",
  });
  const view = h("div", { class: "preview desktop-view", hidden: "" }, h("div", { class: "row" }, controlLabel), frame);
  const actions = h("ol", { class: "desktop-actions", "aria-label": "Recent actions" });
  let stop = () => {};

  const showActions = (d: Desktop) =>
    actions.replaceChildren(
      ...(d.recent_actions.length
        ? d.recent_actions
            .slice()
            .reverse()
            .map((a) => h("li", {}, h("time", { datetime: a.time }, new Date(a.time).toLocaleTimeString()), " ", a.action))
        : [h("li", { class: "muted" }, "No actions yet.")]),
    );

  // The frame loads a link of the kind the switch says.
  async function load() {
    try {
      const link = await client.desktopStream(id, { control: control.checked });
      frame.src = link.url;
      status.textContent = control.checked ? "You have control: your mouse and keys reach the desktop." : "View only.";
    } catch (err) {
      status.textContent = message(err);
    }
  }

  function show(d: Desktop) {
    start.hidden = true;
    view.hidden = false;
    frame.hidden = false;
    status.textContent = `The desktop runs at ${d.width}x${d.height}.`;
    showActions(d);
    void load();
    stop();
    stop = poll(2000, async (alive) => {
      try {
        const now = await client.desktop(id);
        if (alive()) showActions(now);
      } catch {
        // the next read says it again
      }
    });
  }

  control.addEventListener("change", () => void load());
  start.addEventListener("click", async () => {
    status.textContent = "Starting the desktop…";
    try {
      show(await client.startDesktop(id));
    } catch (err) {
      status.textContent = message(err);
    }
  });

  client.desktop(id).then(
    (d) => {
      if (d.running) show(d);
      else {
        start.hidden = false;
        status.textContent = "No desktop runs (a sandbox of template desktop has one).";
      }
    },
    (err) => (status.textContent = message(err)),
  );

  const panel = h(
    "section",
    { "aria-label": "Desktop" },
    h("h3", {}, "Desktop"),
    status,
    start,
    view,
    h("h4", {}, "Recent actions"),
    actions,
  );
  return { panel, close: () => stop() };
}

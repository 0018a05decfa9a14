// The daemon's health: its runtimes, warm pools and version.

import type { Hutch } from "../../sdk/typescript/src/index";
import { h, message } from "./dom";

export function healthPanel(client: Hutch): { panel: HTMLElement; close: () => void } {
  const pre = h("pre", { class: "output" }, "Loading…");
  client.health().then(
    (health) => (pre.textContent = JSON.stringify(health, null, 2)),
    (err) => (pre.textContent = message(err)),
  );
  return { panel: h("section", { "aria-label": "Health" }, pre), close: () => {} };
}

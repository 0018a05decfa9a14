// Settings of the key's workspace.

import type { Hutch } from "../../sdk/typescript/src/index";
import { h } from "./dom";

export function settingsPanel(_client: Hutch): { panel: HTMLElement; close: () => void } {
  return { panel: h("section", { "aria-label": "Settings" }, h("p", { class: "muted" }, "Nothing to set yet.")), close: () => {} };
}

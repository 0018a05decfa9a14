// Small helpers for building the console's DOM.

import { HutchError } from "../../sdk/typescript/src/index";

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

export function message(err: unknown): string {
  if (err instanceof HutchError) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

/** A select named id with an option for each value; the value "" shows
 * as blank ("default", "any"). */
export function select(id: string, values: readonly string[], blank = "", attrs: Record<string, string> = {}): HTMLSelectElement {
  return h("select", { id, name: id, ...attrs }, ...values.map((v) => h("option", { value: v }, v || blank)));
}

/** A table with these column headings; fill shows its rows, or a line
 * saying there are none. */
export function listTable(label: string, columns: string[]): { table: HTMLTableElement; fill: (rows: HTMLElement[], none: string) => void } {
  const body = h("tbody");
  const table = h("table", { "aria-label": label }, h("thead", {}, h("tr", {}, ...columns.map((t) => h("th", { scope: "col" }, t)))), body);
  const fill = (rows: HTMLElement[], none: string) =>
    body.replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: String(columns.length), class: "muted" }, none))]));
  return { table, fill };
}

/** How long ago iso was, in a short unit. */
export function age(iso?: string): string {
  if (!iso) return "";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** poll calls read every `every` ms (asked again after each call when it
 * is a function), each call once the last has answered (so that a slow
 * answer never overlaps the next), until the function it returns is
 * called. read catches its own errors; alive() says, after an await,
 * whether the view is still there to be drawn on. */
export function poll(every: number | (() => number), read: (alive: () => boolean) => Promise<void>): () => void {
  let timer = 0;
  let stopped = false;
  const alive = () => !stopped;
  const next = async () => {
    await read(alive);
    if (!stopped) timer = window.setTimeout(next, typeof every === "number" ? every : every());
  };
  void next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** A button for a row's action: its accessible name is label (the action
 * and what it acts on, as several rows have the same button), a failure
 * is said in status, and after runs once it is done either way (a
 * refresh). */
export function actionButton(text: string, label: string, fn: () => unknown, status: HTMLElement, after: () => unknown, cls = ""): HTMLButtonElement {
  const b = h("button", { type: "button", class: cls, "aria-label": label }, text);
  b.addEventListener("click", async () => {
    try {
      await fn();
    } catch (err) {
      status.textContent = message(err);
    }
    await after();
  });
  return b;
}

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

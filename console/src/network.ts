// The connections and lookups a sandbox's network policy refused, newest
// first: what was asked for, the rule that refused it and why. The daemon
// keeps a sandbox's newest 1,000; the table shows the newest 200 of them.

import type { Hutch, NetworkEvent } from "../../sdk/typescript/src/index";
import { h, listTable, message, poll } from "./dom";

const SHOWN = 200;

export function networkPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", class: "muted", id: "network-status" });
  const { table, fill } = listTable("Network events", ["Time", "Kind", "Destination", "Rule", "Reason"]);
  // newest is the id of the newest event shown: the table is built again
  // only when a newer one came.
  let newest = -1;

  const row = (ev: NetworkEvent) =>
    h(
      "tr",
      {},
      h("td", {}, h("time", { datetime: ev.time }, new Date(ev.time).toLocaleTimeString())),
      h("td", {}, ev.kind),
      h("td", { class: "cmd" }, ev.dest),
      h("td", {}, ev.rule),
      h("td", {}, ev.reason),
    );

  const stop = poll(3000, async (alive) => {
    try {
      const events = await client.networkEvents(id);
      if (!alive()) return;
      const last = events.length ? events[events.length - 1].id : 0;
      if (last !== newest) {
        newest = last;
        fill(events.slice(-SHOWN).reverse().map(row), "No network events.");
        status.textContent = events.length > SHOWN ? `The newest ${SHOWN} of ${events.length}.` : "";
      }
    } catch (err) {
      status.textContent = message(err);
    }
  });
  const panel = h(
    "section",
    { "aria-label": "Network" },
    h("h3", {}, "Network events"),
    h("p", { class: "muted" }, "Lookups and connections its network policy refused."),
    table,
    status,
  );
  return { panel, close: stop };
}

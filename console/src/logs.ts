// A background process's log, followed as it is written: what the process
// has kept (its latest 1 MiB), then each line as it comes, until the
// process ends or the view is closed. Services are processes with a port,
// so their logs are followed the same way.

import type { ExecEvent, Hutch } from "../../sdk/typescript/src/index";
import { h, message } from "./dom";

// MAX_LINES bounds what the view keeps: a process that floods its output
// would otherwise grow the page until the tab hangs.
const MAX_LINES = 2000;

export function followLogs(client: Hutch, id: string, name: string): { panel: HTMLElement; close: () => void } {
  const log = h("pre", { class: "output log", role: "log", "aria-label": `Log of ${name}`, tabindex: "0" });
  const status = h("p", { class: "muted", role: "status" }, "Following…");
  const abort = new AbortController();
  // Chunks wait here for the next frame: a flood of small events is one
  // change to the page a frame, not one each. They are bounded too, as a
  // hidden tab has no frames.
  let pending: { kind: string; text: string; lines: number }[] = [];
  let pendingLines = 0;
  let frame = 0;
  let lines = 0;

  function add(ev: ExecEvent) {
    const text = ev.kind === "exit" ? `\n[exit ${ev.exit?.exit_code}]\n` : (ev.text ?? "");
    const n = count(text);
    pending.push({ kind: ev.kind === "exit" ? "muted" : ev.kind, text, lines: n });
    pendingLines += n;
    while (pendingLines - pending[0].lines >= MAX_LINES) pendingLines -= pending.shift()!.lines;
    frame ||= requestAnimationFrame(flush);
  }

  function flush() {
    frame = 0;
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    for (const chunk of pending) {
      const span = h("span", { class: chunk.kind }, chunk.text);
      span.dataset.lines = String(chunk.lines);
      lines += chunk.lines;
      log.append(span);
    }
    pending = [];
    pendingLines = 0;
    trim();
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  // trim drops the oldest chunks, then the oldest lines of the first one,
  // until no more than MAX_LINES are left.
  function trim() {
    while (lines > MAX_LINES && log.firstElementChild) {
      const first = log.firstElementChild as HTMLElement;
      const n = Number(first.dataset.lines);
      const over = lines - MAX_LINES;
      if (n <= over) {
        first.remove();
        lines -= n;
        continue;
      }
      const text = first.textContent ?? "";
      first.textContent = text.slice(pastNewline(text, over));
      first.dataset.lines = String(n - over);
      lines -= over;
    }
  }

  async function follow() {
    try {
      for await (const ev of client.processLogs(id, name, { follow: true, signal: abort.signal })) {
        if (ev.kind === "end") break;
        add(ev);
      }
      status.textContent = "The process ended.";
    } catch (err) {
      if (!abort.signal.aborted) status.textContent = message(err);
    }
  }

  void follow();
  const panel = h("div", { class: "logs" }, log, status);
  return {
    panel,
    close: () => {
      abort.abort();
      cancelAnimationFrame(frame);
    },
  };
}

function count(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

// pastNewline is the index just past text's n-th newline.
function pastNewline(text: string, n: number): number {
  let i = -1;
  while (n-- > 0) i = text.indexOf("\n", i + 1);
  return i + 1;
}

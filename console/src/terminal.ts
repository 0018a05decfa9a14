// A terminal on a sandbox: xterm.js on the PTY WebSocket. Keys typed go
// as binary frames, the terminal's size as a resize message; the
// session's JSON messages (started, exit, error) are shown in its status.

import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";

import type { Hutch } from "../../sdk/typescript/src/index";

export function openTerminal(client: Hutch, id: string, box: HTMLElement, status: HTMLElement): () => void {
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  const term = new Terminal({
    cursorBlink: true,
    fontSize: 14,
    screenReaderMode: true,
    theme: dark ? { background: "#0d1117", foreground: "#e6edf3" } : { background: "#ffffff", foreground: "#1b1f24", cursor: "#1b1f24" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const ws = client.terminal(id, { cols: term.cols, rows: term.rows });
  const encoder = new TextEncoder();
  status.textContent = "Connecting…";
  ws.addEventListener("message", (e) => {
    if (typeof e.data !== "string") {
      term.write(new Uint8Array(e.data as ArrayBuffer));
      return;
    }
    const msg = JSON.parse(e.data) as { type: string; pid?: number; exit_code?: number; error?: { message: string } };
    if (msg.type === "started") status.textContent = `Connected (pid ${msg.pid}).`;
    else if (msg.type === "exit") status.textContent = `The shell exited (${msg.exit_code}).`;
    else if (msg.type === "error") status.textContent = msg.error?.message ?? "The session failed.";
  });
  ws.addEventListener("close", (e) => {
    if (e.code !== 1000) status.textContent = `Disconnected (${e.code}${e.reason ? `: ${e.reason}` : ""}).`;
  });
  const input = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(encoder.encode(d)));
  const resize = term.onResize(({ cols, rows }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", cols, rows })));
  const onWindow = () => fit.fit();
  window.addEventListener("resize", onWindow);
  term.focus();
  return () => {
    window.removeEventListener("resize", onWindow);
    input.dispose();
    resize.dispose();
    ws.close(1000);
    term.dispose();
  };
}

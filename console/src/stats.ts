// A sandbox's use over the last three minutes: CPU, memory and network,
// each a small line chart with its latest figure. The API gives CPU time
// and network bytes as running totals, so those charts show rates: the
// change from one sample to the next over the time between them. A
// sandbox that is not running has no stats: its error is shown and the
// poll goes on, to pick up again when it runs.

import type { Hutch, SandboxStats } from "../../sdk/typescript/src/index";
import { h, message, poll } from "./dom";

const EVERY_MS = 2000;
const SAMPLES = 90;
const SVG = "http://www.w3.org/2000/svg";
const W = 300;
const H = 60;

interface Sample {
  at: number; // performance.now() when it arrived
  s: SandboxStats;
}

// A chart: a title and figure above a line per series.
interface Chart {
  figure: HTMLElement;
  draw: (series: number[][], latest: string, label: string) => void;
}

export function statsPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", class: "muted", id: "stats-status" });
  const cpu = chart("CPU", ["cpu"]);
  const memory = chart("Memory", ["memory"]);
  const network = chart("Network", ["in", "out"]);
  const more = h("p", { class: "muted" });
  const samples: Sample[] = [];

  function draw() {
    const last = samples[samples.length - 1].s;
    const cpuRates = rates(samples, (s) => s.cpu_time_ms * 100); // CPU ms a wall ms, as % of one core
    const cpuNow = cpuRates.at(-1);
    cpu.draw([cpuRates], cpuNow === undefined ? "…" : `${cpuNow.toFixed(1)} %`, cpuNow === undefined ? "CPU: measuring" : `CPU: ${cpuNow.toFixed(1)} % of one core now`);
    const limit = last.memory_limit_bytes > 0 ? ` of ${bytes(last.memory_limit_bytes)}` : "";
    memory.draw([samples.map((x) => x.s.memory_bytes)], bytes(last.memory_bytes) + limit, `Memory: ${bytes(last.memory_bytes)} used now${limit}, peak ${bytes(last.memory_peak_bytes)}`);
    if (last.network_bytes_in === undefined && last.network_bytes_out === undefined) {
      network.figure.hidden = true;
    } else {
      const inRates = rates(samples, (s) => (s.network_bytes_in ?? 0) * 1000);
      const outRates = rates(samples, (s) => (s.network_bytes_out ?? 0) * 1000);
      const now = inRates.length ? `in ${bytes(inRates.at(-1)!)}/s, out ${bytes(outRates.at(-1)!)}/s` : "…";
      network.draw([inRates, outRates], now, inRates.length ? `Network: ${now} now` : "Network: measuring");
      network.figure.hidden = false;
    }
    const pids = last.pids_limit > 0 ? `${last.pids} of ${last.pids_limit}` : String(last.pids);
    const conns = last.network_connections !== undefined ? ` · ${last.network_connections} connections` : "";
    more.textContent = `Tasks ${pids} · disk ${bytes(last.disk_used_bytes)}${conns}`;
  }

  const stop = poll(EVERY_MS, async (alive) => {
    try {
      const s = await client.stats(id);
      if (!alive()) return;
      samples.push({ at: performance.now(), s });
      if (samples.length > SAMPLES) samples.shift();
      status.textContent = "";
      draw();
    } catch (err) {
      status.textContent = message(err);
    }
  });
  const panel = h(
    "section",
    { "aria-label": "Stats" },
    h("h3", {}, "Use"),
    h("div", { class: "charts" }, cpu.figure, memory.figure, network.figure),
    more,
    status,
  );
  return { panel, close: stop };
}

// rates are total's change a millisecond between each two samples; a
// total that went down (its sandbox started again) starts afresh.
function rates(samples: Sample[], total: (s: SandboxStats) => number): number[] {
  const out: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const d = total(samples[i].s) - total(samples[i - 1].s);
    const ms = samples[i].at - samples[i - 1].at;
    out.push(d >= 0 && ms > 0 ? d / ms : 0);
  }
  return out;
}

function chart(title: string, classes: string[]): Chart {
  const figure = h("figure", { class: "chart" });
  const value = h("strong", {}, "…");
  const svg = document.createElementNS(SVG, "svg");
  attrs(svg, { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": `${title}: measuring` });
  const base = document.createElementNS(SVG, "line");
  attrs(base, { x1: "0", y1: String(H - 0.5), x2: String(W), y2: String(H - 0.5), class: "base" });
  const lines = classes.map((c) => {
    const l = document.createElementNS(SVG, "polyline");
    attrs(l, { class: c });
    return l;
  });
  svg.append(base, ...lines);
  const legend = classes.length > 1 ? h("span", { class: "legend" }, ...classes.map((c) => h("span", { class: c }, c))) : "";
  figure.append(h("figcaption", {}, `${title} `, value, legend), svg);
  return {
    figure,
    draw(series, latest, label) {
      value.textContent = latest;
      svg.setAttribute("aria-label", label);
      // Every series shares one scale, from 0 to a little over the
      // highest point shown; the newest point is at the right edge.
      const top = Math.max(...series.flat(), 0) * 1.15 || 1;
      series.forEach((points, i) => {
        const step = W / (SAMPLES - 1);
        const x0 = W - (points.length - 1) * step;
        lines[i].setAttribute("points", points.map((v, j) => `${(x0 + j * step).toFixed(1)},${(H - 1 - (v / top) * (H - 4)).toFixed(1)}`).join(" "));
      });
    },
  };
}

function attrs(el: Element, a: Record<string, string>) {
  for (const [k, v] of Object.entries(a)) el.setAttribute(k, v);
}

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n < 10 && i > 0 ? n.toFixed(1) : Math.round(n)} ${units[i]}`;
}

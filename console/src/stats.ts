// A sandbox's use over time: CPU, memory and network, each a small line
// chart of the samples the daemon keeps of it (GET
// /v1/sandboxes/{id}/metrics: one every interval_s seconds while it runs,
// kept for its life, the newest hour at the default 5 s), with its latest
// figure. The page asks for those after the last it has, every
// interval_s, until it is left. CPU is drawn up to its limit (100 %),
// memory up to its limit; network bytes are running totals, so that chart
// shows rates: the change from one sample to the next over the time
// between them. A time with no samples (the sandbox was suspended or
// stopped) is a gap in the lines.

import type { Hutch, MetricsSample } from "../../sdk/typescript/src/index";
import { h, message, poll } from "./dom";

// KEPT is how many samples the daemon keeps of a sandbox (an hour at the
// default interval): the page forgets older ones as it does.
const KEPT = 720;
// SPAN is the fewest intervals a chart spans: the first samples are drawn
// from its right edge, like the newest, and fill it leftwards.
const SPAN = 60;
// GAP is how many intervals apart two samples are, at most, for the line
// to join them: a wider gap is a time the sandbox was not running.
const GAP = 2.5;
const SVG = "http://www.w3.org/2000/svg";
const W = 300;
const H = 60;

// A point of a line: its time (ms since the epoch) and value.
interface Point {
  t: number;
  v: number;
}

// A chart: a title, the latest figure and a note above a line per
// series, all on one scale from 0 to top.
interface Chart {
  figure: HTMLElement;
  draw: (d: { series: Point[][]; from: number; to: number; every: number; top: number; limit: boolean; latest: string; note: string; label: string }) => void;
}

export function statsPanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const status = h("p", { role: "status", class: "muted", id: "stats-status" });
  const cpu = chart("CPU", ["cpu"]);
  const memory = chart("Memory", ["memory"]);
  const network = chart("Network", ["in", "out"]);
  const charts = h("div", { class: "charts" }, cpu.figure, memory.figure, network.figure);
  charts.hidden = true;
  const more = h("p", { class: "muted" });
  const note = h("p", { class: "muted small", id: "stats-note" }, "Loading…");
  let interval = 0; // seconds between samples, as the daemon said
  let samples: MetricsSample[] = [];

  function draw() {
    const last = samples.at(-1);
    charts.hidden = !last;
    if (!last) {
      more.textContent = "";
      note.textContent = interval ? `No samples yet: they come every ${interval} s while the sandbox runs.` : "This daemon takes no samples of its sandboxes.";
      return;
    }
    const every = interval * 1000;
    const to = Date.parse(last.time);
    const first = Date.parse(samples[0].time);
    const from = Math.min(first - every, to - SPAN * every);
    const points = (v: (s: MetricsSample) => number) => samples.map((s) => ({ t: Date.parse(s.time), v: v(s) }));
    const at = { from, to, every };

    const cpus = last.cpus > 0 ? `${last.cpus} CPU${last.cpus === 1 ? "" : "s"}` : "";
    const cpuNow = `${last.cpu_percent.toFixed(1)} %`;
    cpu.draw({
      ...at,
      series: [points((s) => s.cpu_percent)],
      top: 100,
      limit: true,
      latest: cpuNow,
      note: `of ${cpus || "one CPU"}`,
      label: `CPU over time, in percent of ${cpus ? `its limit of ${cpus}` : "one CPU (it has no limit)"}: ${cpuNow} now`,
    });

    const memoryLimit = last.memory_limit_bytes > 0 ? last.memory_limit_bytes : 0;
    const used = points((s) => s.memory_bytes);
    memory.draw({
      ...at,
      series: [used],
      top: memoryLimit || Math.max(...used.map((p) => p.v)) * 1.15 || 1,
      limit: memoryLimit > 0,
      latest: bytes(last.memory_bytes),
      note: memoryLimit ? `of ${bytes(memoryLimit)}` : "",
      label: `Memory over time, ${memoryLimit ? `up to its limit of ${bytes(memoryLimit)}` : "with no limit"}: ${bytes(last.memory_bytes)} used now`,
    });

    const inRates = rates(samples, (s) => s.network_bytes_in, GAP * every);
    const outRates = rates(samples, (s) => s.network_bytes_out, GAP * every);
    const netNow = inRates.length ? `in ${bytes(inRates.at(-1)!.v)}/s, out ${bytes(outRates.at(-1)!.v)}/s` : "…";
    network.draw({
      ...at,
      series: [inRates, outRates],
      top: Math.max(...inRates.map((p) => p.v), ...outRates.map((p) => p.v), 0) * 1.15 || 1,
      limit: false,
      latest: netNow,
      note: "",
      label: inRates.length ? `Network over time: ${netNow} now` : "Network over time: a rate needs two samples",
    });

    const disk = last.disk_limit_bytes > 0 ? ` of ${bytes(last.disk_limit_bytes)}` : "";
    more.textContent = `Tasks ${last.pids} · disk ${bytes(last.disk_used_bytes)}${disk}`;
    const count = samples.length === 1 ? "1 sample" : `${samples.length} samples over ${duration(to - first)}`;
    note.textContent = `${count}, one every ${interval} s while it runs.`;
  }

  // Until the daemon has said its interval (and while it does not
  // answer), the page asks at the default one.
  const stop = poll(
    () => (interval || 5) * 1000,
    async (alive) => {
      try {
        const last = samples.length ? Date.parse(samples[samples.length - 1].time) : undefined;
        const m = await client.metrics(id, last === undefined ? undefined : new Date(last));
        if (!alive()) return;
        interval = m.interval_s;
        // Only newer ones: a daemon restarted meanwhile starts afresh.
        samples = samples.concat(m.samples.filter((s) => last === undefined || Date.parse(s.time) > last)).slice(-KEPT);
        status.textContent = "";
        draw();
        if (!interval) stop(); // none will come
      } catch (err) {
        status.textContent = message(err);
      }
    },
  );
  const panel = h("section", { "aria-label": "Stats" }, h("h3", {}, "Use"), charts, more, note, status);
  return { panel, close: stop };
}

// rates are total's change a second from each sample to the next, at the
// later one's time; none across a gap wider than gap ms, and a total that
// went down (the daemon started again) starts afresh.
function rates(samples: MetricsSample[], total: (s: MetricsSample) => number, gap: number): Point[] {
  const out: Point[] = [];
  for (let i = 1; i < samples.length; i++) {
    const t = Date.parse(samples[i].time);
    const ms = t - Date.parse(samples[i - 1].time);
    const d = total(samples[i]) - total(samples[i - 1]);
    if (ms > 0 && ms <= gap) out.push({ t, v: d >= 0 ? (d * 1000) / ms : 0 });
  }
  return out;
}

function chart(title: string, classes: string[]): Chart {
  const figure = h("figure", { class: "chart" });
  const value = h("strong", {}, "…");
  const of = h("span");
  const svg = document.createElementNS(SVG, "svg");
  attrs(svg, { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": `${title} over time: no samples yet` });
  const base = document.createElementNS(SVG, "line");
  attrs(base, { x1: "0", y1: String(H - 0.5), x2: String(W), y2: String(H - 0.5), class: "base" });
  // The top, when it is a limit.
  const limit = document.createElementNS(SVG, "line");
  attrs(limit, { x1: "0", y1: "3", x2: String(W), y2: "3", class: "limit" });
  const lines = document.createElementNS(SVG, "g");
  svg.append(base, limit, lines);
  const legend = classes.length > 1 ? h("span", { class: "legend" }, ...classes.map((c) => h("span", { class: c }, c))) : "";
  figure.append(h("figcaption", {}, `${title} `, value, of, legend), svg);
  return {
    figure,
    draw(d) {
      value.textContent = d.latest;
      of.textContent = d.note;
      svg.setAttribute("aria-label", d.label);
      limit.setAttribute("visibility", d.limit ? "visible" : "hidden");
      const x = (t: number) => (((t - d.from) / Math.max(d.to - d.from, 1)) * W).toFixed(1);
      const y = (v: number) => (H - 1 - (Math.min(Math.max(v, 0), d.top) / d.top) * (H - 4)).toFixed(1);
      // A polyline for each run of samples no more than GAP intervals
      // apart, from an interval before its first: each sample tells of
      // the interval it ends.
      const drawn: SVGPolylineElement[] = [];
      d.series.forEach((points, i) => {
        let run: string[] = [];
        points.forEach((p, j) => {
          if (j === 0 || p.t - points[j - 1].t > GAP * d.every) {
            if (run.length) drawn.push(polyline(classes[i], run));
            run = [`${x(p.t - d.every)},${y(p.v)}`];
          }
          run.push(`${x(p.t)},${y(p.v)}`);
        });
        if (run.length) drawn.push(polyline(classes[i], run));
      });
      lines.replaceChildren(...drawn);
    },
  };
}

function polyline(cls: string, points: string[]): SVGPolylineElement {
  const l = document.createElementNS(SVG, "polyline");
  attrs(l, { class: cls, points: points.join(" ") });
  return l;
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

// duration says ms in a short unit.
function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

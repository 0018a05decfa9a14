// A scratch pad for code: run a cell in a language and see what it
// printed and what it gave back. Where the language has a kernel (python,
// javascript and typescript on Jupyter kernels, bash) the cells run in a
// code context, which keeps variables and imports from one run to the
// next and gives rich results (charts, tables); other languages, and a
// sandbox without the kernel, run each cell afresh. The contexts this pad
// starts end when the page is left.

import { HutchError, type Hutch } from "../../sdk/typescript/src/index";
import { h, message } from "./dom";

// LANGUAGES are /code's languages; kernel names a context's language.
const LANGUAGES: { value: string; label: string; kernel?: string; example: string }[] = [
  { value: "python", label: "Python", kernel: "python", example: "print(6 * 7)" },
  { value: "javascript", label: "JavaScript (Deno)", kernel: "javascript", example: "console.log(6 * 7)" },
  { value: "typescript", label: "TypeScript (Deno)", kernel: "typescript", example: "const n: number = 6 * 7;\nconsole.log(n)" },
  { value: "bash", label: "Bash", kernel: "bash", example: "echo $((6 * 7))" },
  { value: "node", label: "Node.js", example: "console.log(6 * 7)" },
  { value: "bun", label: "Bun", example: "console.log(6 * 7)" },
  { value: "sh", label: "sh", example: "echo $((6 * 7))" },
];

// What /code answers: in a context a CodeExecution, otherwise exec's result.
interface Answer {
  stdout: string;
  stderr: string;
  duration_ms: number;
  exit_code?: number;
  timed_out?: boolean;
  truncated?: boolean;
  execution_count?: number;
  restarted?: boolean;
  results?: { is_main_result: boolean; data: Record<string, unknown> }[];
  error?: { name: string; value: string; traceback?: string[] };
  files?: { path: string; download_url?: string }[];
}

export function codePanel(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const language = h("select", { id: "code-language", name: "code-language" }, ...LANGUAGES.map((l) => h("option", { value: l.value }, l.label)));
  const keep = h("input", { type: "checkbox", id: "code-keep", name: "code-keep", checked: "" });
  const source = h("textarea", { id: "code-source", name: "code-source", class: "code", rows: "8", spellcheck: "false", autocapitalize: "off" });
  source.value = LANGUAGES[0].example;
  // Execute, not Run: the command form above has the page's Run button.
  const execute = h("button", { type: "submit", class: "primary", "aria-keyshortcuts": "Control+Enter Meta+Enter", title: "Ctrl+Enter" }, "Execute");
  const restart = h("button", { type: "button", disabled: "" }, "Restart kernel");
  const status = h("p", { role: "status", class: "muted", id: "code-status" });
  const result = h("div", { class: "code-result", role: "region", "aria-label": "Result", "aria-live": "polite" });
  const form = h(
    "form",
    { "aria-label": "Code" },
    h(
      "div",
      { class: "row" },
      h("label", { for: "code-language" }, "Language", language),
      h("label", { for: "code-keep", class: "check" }, keep, "Keep state in a kernel"),
    ),
    h("label", { for: "code-source" }, "Code", source),
    h("div", { class: "row" }, execute, restart, h("span", { class: "muted" }, "Ctrl+Enter runs it too.")),
  );
  // A context by its language, and why this sandbox lacks a language's
  // kernel (not asked for again).
  const contexts = new Map<string, string>();
  const lacking = new Map<string, string>();
  // wanted is the box's state as the user left it, kept while a language
  // without a kernel unticks it.
  let wanted = true;
  let running = false;

  const current = () => LANGUAGES.find((l) => l.value === language.value) ?? LANGUAGES[0];

  function sync() {
    const l = current();
    const can = l.kernel !== undefined && !lacking.has(l.kernel);
    keep.disabled = !can;
    keep.checked = can && wanted;
    restart.disabled = !(l.kernel && contexts.has(l.kernel));
  }

  // context returns the context to run language's cells in, started on
  // its first cell; undefined to run them afresh.
  async function context(kernel: string | undefined): Promise<string | undefined> {
    if (!kernel || !wanted || lacking.has(kernel)) return undefined;
    let ctx = contexts.get(kernel);
    if (ctx) return ctx;
    status.textContent = `Starting the ${kernel} kernel…`;
    try {
      ctx = (await client.createContext(id, { language: kernel })).id;
      contexts.set(kernel, ctx);
      return ctx;
    } catch (err) {
      if (!(err instanceof HutchError && err.code === "failed_precondition")) throw err;
      lacking.set(kernel, message(err));
      return undefined;
    } finally {
      sync();
    }
  }

  async function run() {
    if (running) return;
    running = true;
    execute.disabled = true;
    const l = current();
    try {
      const ctx = await context(l.kernel);
      status.textContent = "Running…";
      const answer = (await client.runCode(id, ctx ? { code: source.value, context_id: ctx } : { code: source.value, language: l.value })) as unknown as Answer;
      show(answer, ctx !== undefined);
      const why = l.kernel && lacking.get(l.kernel);
      status.textContent = why ? `${why} Each run starts afresh.` : "Done.";
    } catch (err) {
      status.textContent = message(err);
    } finally {
      running = false;
      execute.disabled = false;
    }
  }

  function show(a: Answer, inContext: boolean) {
    const parts: Node[] = [];
    const facts = inContext ? [`[${a.execution_count}]`] : [`exit ${a.exit_code}`];
    facts.push(`${a.duration_ms} ms`);
    if (a.timed_out) facts.push("timed out");
    if (a.truncated) facts.push("output cut");
    if (a.restarted) facts.push("the kernel was restarted: its state is gone");
    parts.push(h("p", { class: "muted" }, facts.join(" · ")));
    if (a.stdout) parts.push(h("pre", { class: "output" }, a.stdout));
    if (a.stderr) parts.push(h("pre", { class: "output" }, h("span", { class: "stderr" }, a.stderr)));
    for (const r of a.results ?? []) parts.push(rich(r.data));
    if (a.error) {
      const trace = (a.error.traceback ?? []).join("\n").replace(/\x1b\[[0-9;]*m/g, "");
      parts.push(h("pre", { class: "output" }, h("span", { class: "stderr" }, trace || `${a.error.name}: ${a.error.value}`)));
    }
    if (a.files?.length) {
      parts.push(
        h(
          "ul",
          { class: "written", "aria-label": "Files written" },
          ...a.files.map((f) => h("li", {}, f.download_url ? h("a", { href: f.download_url, download: "" }, f.path) : f.path)),
        ),
      );
    }
    if (parts.length === 1) parts.push(h("p", { class: "muted" }, "Nothing printed."));
    result.replaceChildren(...parts);
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void run();
  });
  source.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void run();
    }
  });
  // A new language's example replaces the code only while the code is
  // still the last language's example.
  let previous = current();
  language.addEventListener("change", () => {
    if (source.value === previous.example) source.value = current().example;
    previous = current();
    sync();
  });
  keep.addEventListener("change", () => {
    wanted = keep.checked;
    sync();
  });
  restart.addEventListener("click", async () => {
    const ctx = contexts.get(current().kernel ?? "");
    if (!ctx) return;
    try {
      await client.restartContext(id, ctx);
      status.textContent = "The kernel was restarted: its state is gone.";
    } catch (err) {
      status.textContent = message(err);
    }
  });
  sync();

  const panel = h("section", { "aria-label": "Code" }, h("h3", {}, "Code"), form, status, result);
  return {
    panel,
    // The kernels end with the page: a kernel is a process in the
    // sandbox, and a sandbox has room for 16.
    close: () => {
      for (const ctx of contexts.values()) void client.deleteContext(id, ctx).catch(() => {});
    },
  };
}

// rich shows a result by the richest form of it the kernel gave, as a
// notebook does. HTML goes in a frame that runs no scripts and has an
// origin of its own.
function rich(data: Record<string, unknown>): HTMLElement {
  const text = typeof data["text/plain"] === "string" ? (data["text/plain"] as string) : "";
  for (const type of ["image/png", "image/jpeg"]) {
    if (typeof data[type] === "string") return h("img", { class: "rich", src: `data:${type};base64,${data[type]}`, alt: text || "An image the code gave" });
  }
  if (typeof data["image/svg+xml"] === "string") {
    return h("img", { class: "rich", src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(data["image/svg+xml"] as string)}`, alt: text || "An image the code gave" });
  }
  if (typeof data["text/html"] === "string") {
    const frame = h("iframe", { class: "rich", sandbox: "", title: "HTML result", referrerpolicy: "no-referrer" });
    frame.srcdoc = data["text/html"] as string;
    return frame;
  }
  if ("application/json" in data) return h("pre", { class: "output" }, JSON.stringify(data["application/json"], null, 2));
  for (const type of ["text/markdown", "text/latex"]) {
    if (typeof data[type] === "string") return h("pre", { class: "output" }, data[type] as string);
  }
  return h("pre", { class: "output" }, text);
}

// Hutch's web console: sign in with an API key (kept in this tab's session
// storage, sent as a bearer token, never in a URL), see and drive the
// key's sandboxes. The API client is the TypeScript SDK.

import { Hutch, HutchError, type Sandbox } from "../../sdk/typescript/src/index";
import { h, listTable, message } from "./dom";
import "./style.css";

const KEY = "hutch.apiKey";
const app = document.getElementById("app")!;
let client: Hutch | undefined;
let timer: number | undefined;
// leave undoes what the current view set up (a terminal's session).
let leave: (() => void) | undefined;

function signedIn(key: string): Hutch {
  return new Hutch({ url: location.origin, apiKey: key });
}

function showSignIn(error = ""): void {
  stopRefresh();
  const input = h("input", { type: "password", id: "key", name: "key", autocomplete: "off", required: "" });
  const status = h("p", { role: "alert", class: "error-text" }, error);
  const form = h(
    "form",
    { class: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Hutch"),
    h("p", { class: "muted" }, "Sign in with an API key. It stays in this tab only."),
    h("label", { for: "key" }, "API key", input),
    h("p", {}, h("button", { type: "submit", class: "primary" }, "Sign in")),
    status,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const c = signedIn(input.value.trim());
    try {
      await c.listSandboxes();
    } catch (err) {
      status.textContent =
        err instanceof HutchError && err.code === "unauthenticated"
          ? "That key was refused: check it, or make one with hutch key create."
          : message(err);
      return;
    }
    sessionStorage.setItem(KEY, input.value.trim());
    client = c;
    location.hash = "#/sandboxes";
    route();
  });
  app.replaceChildren(form);
  input.focus();
}

function shell(title: string, ...content: Node[]): void {
  const signOut = h("button", { type: "button" }, "Sign out");
  signOut.addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    client = undefined;
    location.hash = "";
    showSignIn();
  });
  app.replaceChildren(
    h(
      "header",
      {},
      h("h1", {}, "Hutch"),
      h(
        "nav",
        { "aria-label": "Sections" },
        h("a", { href: "#/sandboxes" }, "Sandboxes"),
        h("a", { href: "#/secrets" }, "Secrets"),
        h("a", { href: "#/keys" }, "Keys"),
        h("a", { href: "#/health" }, "Health"),
      ),
      h("span", { class: "who" }, signOut),
    ),
    h("main", {}, h("h2", {}, title), ...content),
  );
}

function age(iso?: string): string {
  if (!iso) return "";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

function stopRefresh(): void {
  if (timer !== undefined) clearInterval(timer);
  timer = undefined;
}

async function showSandboxes(): Promise<void> {
  const c = client!;
  const template = h("input", { id: "template", name: "template", placeholder: "base" });
  const runtime = h("select", { id: "runtime", name: "runtime" }, h("option", { value: "" }, "default"), h("option", { value: "runc" }, "runc"), h("option", { value: "gvisor" }, "gvisor"));
  const status = h("p", { role: "status", "aria-live": "polite", class: "muted" });
  const create = h(
    "form",
    { class: "row", "aria-label": "Create a sandbox" },
    h("label", { for: "template" }, "Template", template),
    h("label", { for: "runtime" }, "Runtime", runtime),
    h("button", { type: "submit", class: "primary" }, "Create sandbox"),
  );
  const { table, fill } = listTable("Sandboxes", ["ID", "State", "Runtime", "Template", "Age", "Actions"]);
  create.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.textContent = "Creating…";
    try {
      const sb = await c.createSandbox({ template: template.value.trim() || undefined, runtime: (runtime.value || undefined) as Sandbox["runtime"] });
      status.textContent = `Created ${sb.id}.`;
      await refresh();
    } catch (err) {
      status.textContent = message(err);
    }
  });
  const act = async (label: string, fn: () => Promise<unknown>) => {
    status.textContent = `${label}…`;
    try {
      await fn();
      status.textContent = `${label}: done.`;
    } catch (err) {
      status.textContent = `${label}: ${message(err)}`;
    }
    await refresh();
  };
  const row = (sb: Sandbox) => {
    const buttons = h("td", { class: "actions" });
    const button = (text: string, fn: () => Promise<unknown>, cls = "") => {
      const b = h("button", { type: "button", class: cls, "aria-label": `${text} ${sb.id}` }, text);
      b.addEventListener("click", () => act(`${text} ${sb.id}`, fn));
      buttons.append(b);
    };
    if (sb.state === "running") {
      button("Suspend", () => c.sandboxAction(sb.id, "suspend"));
      button("Stop", () => c.sandboxAction(sb.id, "stop"));
    } else if (sb.state === "suspended" || sb.state === "stopped" || sb.state === "paused") {
      button("Resume", () => c.sandboxAction(sb.id, sb.state === "paused" ? "unpause" : "resume"));
    }
    button("Delete", () => c.deleteSandbox(sb.id), "danger");
    return h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/sandboxes/${sb.id}` }, sb.id)),
      h("td", { class: `state ${sb.state}` }, sb.state ?? ""),
      h("td", {}, sb.runtime ?? ""),
      h("td", {}, sb.template ?? ""),
      h("td", {}, age(sb.created_at)),
      buttons,
    );
  };
  const refresh = async () => {
    try {
      const list = await c.listSandboxes();
      list.sort((a, b) => (b.created_at ?? "").localeCompare(a.created_at ?? ""));
      fill(list.map(row), "No sandboxes yet.");
    } catch (err) {
      if (err instanceof HutchError && err.code === "unauthenticated") return showSignIn("Your key is no longer accepted.");
      status.textContent = message(err);
    }
  };
  shell("Sandboxes", create, status, table);
  await refresh();
  stopRefresh();
  timer = window.setInterval(refresh, 2000);
}

async function showSandbox(id: string): Promise<void> {
  const c = client!;
  const info = h("p", { class: "muted" }, "Loading…");
  const cmd = h("input", { id: "cmd", name: "cmd", value: "uname -a", size: "40" });
  const out = h("pre", { class: "output", "aria-live": "polite", "aria-label": "Output" });
  const form = h("form", { class: "row", "aria-label": "Run a command" }, h("label", { for: "cmd" }, "Command", cmd), h("button", { type: "submit", class: "primary" }, "Run"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    out.replaceChildren();
    try {
      for await (const ev of c.execStream(id, cmd.value)) {
        if (ev.kind === "exit") out.append(h("span", { class: "muted" }, `\n[exit ${ev.exit?.exit_code}]`));
        else out.append(h("span", { class: ev.kind }, ev.text ?? ""));
      }
    } catch (err) {
      out.append(h("span", { class: "stderr" }, message(err)));
    }
  });
  const termStatus = h("p", { role: "status", class: "muted", id: "terminal-status" });
  const termBox = h("div", { class: "terminal", role: "region", "aria-label": "Terminal" });
  // What this view opens, closed when it is left.
  const closers: (() => void)[] = [];
  leave = () => closers.forEach((close) => close());
  const openButton = h("button", { type: "button" }, "Open a terminal");
  // The terminal and the editor are loaded with their views: the rest of
  // the console starts without them.
  openButton.addEventListener("click", async () => {
    openButton.remove();
    const { openTerminal } = await import("./terminal");
    closers.push(openTerminal(c, id, termBox, termStatus));
  });
  const servicesBox = h("div");
  void import("./services").then(({ servicesPanel }) => {
    const services = servicesPanel(c, id);
    closers.push(services.close);
    servicesBox.replaceChildren(services.panel);
  });
  const filesBox = h("div");
  void import("./files").then(({ filesPanel }) => {
    const files = filesPanel(c, id);
    closers.push(files.close);
    filesBox.replaceChildren(files.panel);
  });
  shell(`Sandbox ${id}`, info, h("h3", {}, "Terminal"), openButton, termBox, termStatus, h("h3", {}, "Run a command"), form, out, servicesBox, filesBox);
  try {
    const sb = await c.getSandbox(id);
    info.textContent = `${sb.state} · ${sb.runtime} · template ${sb.template} · created ${age(sb.created_at)} ago`;
  } catch (err) {
    info.textContent = message(err);
  }
}

async function showHealth(): Promise<void> {
  const pre = h("pre", { class: "output" }, "Loading…");
  shell("Health", pre);
  try {
    pre.textContent = JSON.stringify(await client!.health(), null, 2);
  } catch (err) {
    pre.textContent = message(err);
  }
}

function route(): void {
  stopRefresh();
  leave?.();
  leave = undefined;
  const key = sessionStorage.getItem(KEY);
  if (!key) return showSignIn();
  client ??= signedIn(key);
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "sandboxes" && parts[1]) void showSandbox(decodeURIComponent(parts[1]));
  else if (parts[0] === "health") void showHealth();
  else if (parts[0] === "secrets") void import("./secrets").then(({ secretsPanel }) => shell("Secrets", secretsPanel(client!)));
  else if (parts[0] === "keys") void import("./keys").then(({ keysPanel }) => shell("API keys", keysPanel(client!)));
  else void showSandboxes();
}

window.addEventListener("hashchange", route);
route();

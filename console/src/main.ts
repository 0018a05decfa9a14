// Hutch's web console: sign in with an API key (kept in this tab's session
// storage, sent as a bearer token, never in a URL), see and drive the
// key's sandboxes. The API client is the TypeScript SDK.

import { Hutch, HutchError, type Sandbox } from "../../sdk/typescript/src/index";
import { age, h, listTable, message } from "./dom";
import "./style.css";

const KEY = "hutch.apiKey";
const app = document.getElementById("app")!;
let client: Hutch | undefined;
let timer: number | undefined;
// leave undoes what the current view set up (a terminal's session, timers).
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
        h("a", { href: "#/settings" }, "Settings"),
        h("a", { href: "#/health" }, "Health"),
      ),
      h("span", { class: "who" }, signOut),
    ),
    h("main", {}, h("h2", {}, title), ...content),
  );
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


// panel shows a view loaded with its module; what it opened closes when
// it is left.
function panel(title: string, loaded: Promise<{ panel: HTMLElement; close: () => void }>): void {
  void loaded.then((view) => {
    leave = view.close;
    shell(title, view.panel);
  });
}

function route(): void {
  stopRefresh();
  leave?.();
  leave = undefined;
  const key = sessionStorage.getItem(KEY);
  if (!key) return showSignIn();
  client ??= signedIn(key);
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "sandboxes" && parts[1]) {
    const id = decodeURIComponent(parts[1]);
    panel(`Sandbox ${id}`, import("./sandbox").then((m) => m.sandboxPage(client!, id)));
  }
  else if (parts[0] === "health") panel("Health", import("./health").then((m) => m.healthPanel(client!)));
  else if (parts[0] === "settings") panel("Settings", import("./settings").then((m) => m.settingsPanel(client!)));
  else if (parts[0] === "secrets") void import("./secrets").then(({ secretsPanel }) => shell("Secrets", secretsPanel(client!)));
  else if (parts[0] === "keys") void import("./keys").then(({ keysPanel }) => shell("API keys", keysPanel(client!)));
  else void showSandboxes();
}

window.addEventListener("hashchange", route);
route();

// Hutch's web console: sign in with an API key (kept in this tab's session
// storage, sent as a bearer token, never in a URL), see and drive the
// key's sandboxes. The API client is the TypeScript SDK.

import { Hutch, HutchError } from "../../sdk/typescript/src/index";
import { h, message } from "./dom";
import { sandboxesPanel } from "./sandboxes";
import "./style.css";

const KEY = "hutch.apiKey";
const app = document.getElementById("app")!;
let client: Hutch | undefined;
// leave undoes what the current view set up (a terminal's session, timers).
let leave: (() => void) | undefined;
// shown counts the views asked for (see panel).
let shown = 0;

function signedIn(key: string): Hutch {
  return new Hutch({ url: location.origin, apiKey: key });
}

function showSignIn(error = ""): void {
  leave?.();
  leave = undefined;
  shown++;
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
    go("#/sandboxes");
  });
  app.replaceChildren(form);
  input.focus();
}

function shell(title: string, ...content: Node[]): void {
  const signOut = h("button", { type: "button" }, "Sign out");
  signOut.addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    client = undefined;
    go(""); // the sign-in form, as no key is kept
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

// refused signs out when the key is no longer accepted, and says whether
// err was that.
function refused(err: unknown): boolean {
  if (!(err instanceof HutchError && err.code === "unauthenticated")) return false;
  showSignIn("Your key is no longer accepted.");
  return true;
}

// panel shows a view loaded with its module; what it opened closes when
// it is left. A view that loads after another was asked for is closed
// unseen.
function panel(title: string, loaded: Promise<{ panel: HTMLElement; close: () => void }>): void {
  const mine = ++shown;
  void loaded.then((view) => {
    if (mine !== shown) return view.close();
    leave = view.close;
    shell(title, view.panel);
  });
}

function route(): void {
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
  else panel("Sandboxes", Promise.resolve(sandboxesPanel(client, refused)));
}

// go shows the view of hash now, once. The URL changes through the
// history, which fires no hashchange: setting location.hash would route a
// second time, later, and a sign-in form filled in between would be
// replaced by an empty one.
function go(hash: string): void {
  if (location.hash !== hash) history.pushState(null, "", hash || location.pathname + location.search);
  route();
}

window.addEventListener("hashchange", route);
route();

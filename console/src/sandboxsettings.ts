// One sandbox's settings: what it was made with (runtime, template,
// limits, workspace, user, key, volumes, the secrets it may use) and the
// two things that can change while it lives, its network policy and its
// idle timer (PATCH /v1/sandboxes/{id}: a new policy decides its next
// connections without a restart; a new timeout counts from now).

import type { Hutch, Sandbox } from "../../sdk/typescript/src/index";
import { h, message, select } from "./dom";

export function sandboxSettings(client: Hutch, id: string): { panel: HTMLElement; close: () => void } {
  const facts = h("dl", { class: "facts" });
  const status = h("p", { role: "status", class: "muted", id: "sandbox-settings-status" });

  const mode = select("policy-mode", ["none", "allowlist", "full", "learn"]);
  const allow = h("input", { id: "policy-allow", name: "policy-allow", size: "40", placeholder: "pypi.org, *.github.com" });
  const deny = h("input", { id: "policy-deny", name: "policy-deny", size: "40", placeholder: "203.0.113.0/24" });
  const network = h(
    "form",
    { class: "row", "aria-label": "Network policy" },
    h("label", { for: "policy-mode" }, "Network mode", mode),
    h("label", { for: "policy-allow" }, "Allow (comma-separated)", allow),
    h("label", { for: "policy-deny" }, "Deny (comma-separated)", deny),
    h("button", { type: "submit" }, "Set network policy"),
  );
  const idle = h("input", { id: "idle-timeout", name: "idle-timeout", type: "number", min: "1", required: "" });
  const action = select("idle-then", ["suspend", "stop", "delete"]);
  const timer = h(
    "form",
    { class: "row", "aria-label": "Idle timer" },
    h("label", { for: "idle-timeout" }, "Idle timeout (s), from now", idle),
    h("label", { for: "idle-then" }, "Then", action),
    h("button", { type: "submit" }, "Set idle timer"),
  );

  const list = (v: string) =>
    v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  const show = (sb: Sandbox) => {
    const fact = (term: string, value: string) => [h("dt", {}, term), h("dd", {}, value || "—")];
    const limits = [
      sb.cpus ? `${sb.cpus} CPU` : "",
      sb.memory_mb ? `${sb.memory_mb} MiB memory` : "",
      sb.disk_mb ? `${sb.disk_mb} MiB disk` : "",
      sb.pids ? `${sb.pids} tasks` : "",
    ].filter(Boolean);
    facts.replaceChildren(
      ...fact("Runtime", `${sb.runtime} (${sb.runtime === "gvisor" ? "its own kernel: gVisor" : "the host's kernel, in namespaces and cgroups"})`),
      ...fact("Template", sb.template ?? ""),
      ...fact("Limits", limits.join(" · ")),
      ...fact("Workspace", sb.workspace ?? ""),
      ...fact("For user", sb.user ?? ""),
      ...fact("Key", sb.key ?? ""),
      ...fact("Volumes", (sb.volumes ?? []).map((v) => `${v.name} at ${v.path ?? `/mnt/${v.name}`}${v.access === "ro" ? " (read-only)" : ""}`).join(", ")),
      ...fact("Secrets", sb.secrets?.length ? sb.secrets.join(", ") : "every secret of its workspace (and of its user)"),
      ...fact("Deleted at", sb.expires_at ? new Date(sb.expires_at).toLocaleString() : ""),
    );
    mode.value = sb.network?.mode ?? "full";
    allow.value = (sb.network?.allow ?? []).join(", ");
    deny.value = (sb.network?.deny ?? []).join(", ");
    idle.value = String(sb.idle_timeout_s ?? "");
    action.value = sb.idle_action ?? "suspend";
  };
  const change = async (what: string, req: Parameters<Hutch["updateSandbox"]>[1]) => {
    try {
      show(await client.updateSandbox(id, req));
      status.textContent = `${what}: done.`;
    } catch (err) {
      status.textContent = `${what}: ${message(err)}`;
    }
  };
  network.addEventListener("submit", (e) => {
    e.preventDefault();
    // Allow rules go with an allow-list only, deny rules with any mode
    // but none, as the API asks.
    const m = mode.value as "none" | "allowlist" | "full";
    void change("Network policy", { network: { mode: m, allow: m === "allowlist" ? list(allow.value) : [], deny: m === "none" ? [] : list(deny.value) } });
  });
  timer.addEventListener("submit", (e) => {
    e.preventDefault();
    void change("Idle timer", { idle_timeout_s: Number(idle.value), idle_action: action.value });
  });
  client.getSandbox(id).then(show, (err) => (status.textContent = message(err)));

  const panel = h(
    "section",
    { "aria-labelledby": "sandbox-settings-title" },
    h("h3", { id: "sandbox-settings-title" }, "Settings"),
    facts,
    network,
    timer,
    status,
  );
  return { panel, close: () => {} };
}

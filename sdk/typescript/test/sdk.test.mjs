// The TypeScript SDK against a real daemon: $HUTCH_URL and $HUTCH_API_KEY
// (make test runs it from test/e2e, on a daemon of its own).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Hutch, HutchError } from "../dist/index.js";

const skip = process.env.HUTCH_URL ? false : "needs a daemon: set HUTCH_URL and HUTCH_API_KEY";

describe("Hutch", { skip }, () => {
  const hutch = new Hutch();
  let sb;

  before(async () => {
    sb = await hutch.createSandbox({ runtime: process.env.HUTCH_RUNTIME || undefined });
  });
  after(async () => {
    if (sb) await hutch.deleteSandbox(sb.id, { wait: true });
  });

  test("health", async () => {
    const h = await hutch.health();
    assert.equal(h.status, "ok");
  });

  test("exec", async () => {
    const r = await hutch.exec(sb.id, "echo out; echo err >&2; exit 5");
    assert.deepEqual([r.exit_code, r.stdout, r.stderr], [5, "out\n", "err\n"]);
    const cat = await hutch.exec(sb.id, ["cat"], { stdin: "piped" });
    assert.equal(cat.stdout, "piped");
  });

  test("exec stream", async () => {
    const events = [];
    for await (const ev of hutch.execStream(sb.id, "echo one; sleep 0.2; echo two >&2; sleep 0.2; printf '\\377'; exit 3")) events.push(ev);
    assert.deepEqual(events.slice(0, 2).map((e) => [e.kind, e.text]), [["stdout", "one\n"], ["stderr", "two\n"]]);
    assert.deepEqual([...events[2].data], [0xff]); // not UTF-8: sent as base64
    assert.equal(events.at(-1).kind, "exit");
    assert.equal(events.at(-1).exit.exit_code, 3);
  });

  test("files", async () => {
    const bytes = new Uint8Array(1000).map((_, i) => i % 256);
    const entry = await hutch.writeFile(sb.id, "ts/data.bin", bytes);
    assert.equal(entry.size, 1000);
    assert.deepEqual(await hutch.readFile(sb.id, "ts/data.bin"), bytes);
    await hutch.writeFile(sb.id, "ts/note.txt", "hello");
    assert.equal(await hutch.readText(sb.id, "ts/note.txt"), "hello");
    await hutch.moveFile(sb.id, "ts/note.txt", "ts/moved.txt");
    assert.deepEqual((await hutch.listFiles(sb.id, "ts")).map((e) => e.name).sort(), ["data.bin", "moved.txt"]);
    await hutch.deleteFile(sb.id, "ts/moved.txt");
    await assert.rejects(hutch.statFile(sb.id, "ts/moved.txt"), (e) => e instanceof HutchError && e.code === "not_found" && e.status === 404);
  });

  test("processes and their logs", async () => {
    await hutch.startProcess(sb.id, "echo started; sleep 600", { name: "bg" });
    let out = "";
    for (let i = 0; i < 100 && !out.includes("started"); i++) {
      out = "";
      for await (const ev of hutch.processLogs(sb.id, "bg")) if (ev.kind === "stdout") out += ev.text;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(out, "started\n");
    assert.ok((await hutch.listProcesses(sb.id)).some((p) => p.name === "bg"));
    await hutch.deleteProcess(sb.id, "bg");
    assert.ok(!(await hutch.listProcesses(sb.id)).some((p) => p.name === "bg"));
  });

  test("a service and its preview link", async () => {
    await hutch.writeFile(sb.id, "site/index.html", "<h1>from the sandbox</h1>");
    await hutch.startService(sb.id, "python3 -m http.server 8000", 8000, { name: "web", cwd: "/home/user/workspace/site" });
    for (let i = 0; (await hutch.getService(sb.id, "web")).status !== "running"; i++) {
      assert.ok(i < 100, "the service never ran");
      await new Promise((r) => setTimeout(r, 200));
    }
    const link = await hutch.serviceLink(sb.id, "web");
    // Its first visit sets the preview's cookie and redirects.
    const first = await fetch(link.path_url, { redirect: "manual" });
    const cookie = first.headers.get("set-cookie").split(";")[0];
    const page = await fetch(new URL(first.headers.get("location"), link.path_url), { headers: { cookie } });
    assert.match(await page.text(), /from the sandbox/);
    // Revoked, the link opens nothing, by its URL or its cookie.
    await hutch.revokeServiceLinks(sb.id, "web");
    assert.equal((await fetch(link.path_url, { redirect: "manual" })).status, 401);
    assert.equal((await fetch(new URL(first.headers.get("location"), link.path_url), { headers: { cookie } })).status, 401);
    await hutch.deleteService(sb.id, "web");
  });

  test("metrics", async () => {
    // The daemon samples every 0.5 s (test/e2e): two samples come soon.
    let m;
    for (let i = 0; (m = await hutch.metrics(sb.id)).samples.length < 2; i++) {
      assert.ok(i < 150, `fewer than two samples in 30 s: ${JSON.stringify(m)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(m.interval_s > 0);
    const last = m.samples.at(-1);
    assert.deepEqual(Object.keys(last).sort(), [
      "cpu_percent", "cpus", "disk_limit_bytes", "disk_used_bytes", "memory_bytes", "memory_limit_bytes",
      "network_bytes_in", "network_bytes_out", "pids", "time",
    ]);
    assert.deepEqual([last.cpus, last.memory_limit_bytes, last.disk_limit_bytes], [sb.cpus, sb.memory_mb * 2 ** 20, sb.disk_mb * 2 ** 20]);
    assert.ok(last.cpus > 0 && last.memory_bytes > 0 && last.cpu_percent >= 0 && last.pids >= 1, JSON.stringify(last));
    const times = m.samples.map((s) => new Date(s.time));
    assert.ok(times.every((t, i) => !Number.isNaN(t.getTime()) && (i === 0 || t >= times[i - 1])), JSON.stringify(m.samples));
    // A sample's time is to the millisecond, as a Date: since is exact.
    const later = await hutch.metrics(sb.id, times.at(-1));
    assert.ok(later.samples.every((s) => new Date(s.time) > times.at(-1)), JSON.stringify(later));
  });

  test("tools", async () => {
    const anthropic = await hutch.listTools();
    const openai = await hutch.listTools("openai");
    assert.ok(anthropic.every((t) => t.name && t.description && t.input_schema));
    assert.deepEqual(new Set(openai.map((t) => t.type)), new Set(["function"]));
    await hutch.writeFile(sb.id, "t.txt", "tool text\n");
    const res = await hutch.runTool(sb.id, "sandbox_read_file", { path: "t.txt" });
    assert.equal(res.status, "success");
    assert.match(JSON.stringify(res.result), /tool text/);
  });

  test("secrets are never read back", async () => {
    const value = `ts-secret-${Date.now()}`;
    await hutch.setSecret({ name: "TS_SDK_TOKEN", value });
    try {
      const listed = await hutch.listSecrets();
      assert.ok(listed.some((s) => s.name === "TS_SDK_TOKEN"));
      assert.ok(!JSON.stringify(listed).includes(value));
    } finally {
      await hutch.deleteSecret("TS_SDK_TOKEN");
    }
  });

  test("who a key is, in its workspace, for a user; quotas", async () => {
    const me = await hutch.whoami();
    assert.equal(me.admin, true);
    const made = await hutch.createKey({ name: "ts-sdk-whoami", workspace: "ts-sdk", tools_mode: "selective", network_mode: "none" });
    try {
      const as = new Hutch({ apiKey: made.key }).withUser("alice");
      const them = await as.whoami();
      assert.deepEqual(
        [them.admin, them.key, them.workspace, them.user, them.tools_mode, them.network_mode],
        [false, "ts-sdk-whoami", "ts-sdk", "alice", "selective", "none"],
      );
      const usage = await hutch.setQuota("ts-sdk", { sandboxes: 3 });
      assert.equal(usage.quota.sandboxes, 3);
      await assert.rejects(as.setQuota("ts-sdk", { sandboxes: 9 }), (e) => e.code === "permission_denied");
      assert.equal((await hutch.withWorkspace("ts-sdk").whoami()).workspace, "ts-sdk");
    } finally {
      await hutch.deleteKey("ts-sdk-whoami");
    }
  });

  test("checkpoints, rollback and forks", async () => {
    await hutch.writeFile(sb.id, "ck.txt", "before\n");
    const cp = await hutch.checkpoint(sb.id, { name: "ts" });
    assert.match(cp.id, /^c\d+$/);
    await hutch.writeFile(sb.id, "ck.txt", "after\n");
    const diff = await hutch.checkpointDiff(sb.id, cp.id);
    assert.ok(diff.changes.some((c) => c.path === "/home/user/workspace/ck.txt" && c.kind === "changed"), JSON.stringify(diff));
    const one = await hutch.checkpointDiff(sb.id, cp.id, "/home/user/workspace/ck.txt");
    assert.match(one.unified, /-before\n\+after\n/);
    assert.ok((await hutch.checkpoints(sb.id)).some((c) => c.id === cp.id));
    const back = await hutch.rollback(sb.id, cp.id);
    assert.equal(back.state, "running");
    assert.equal(new TextDecoder().decode(await hutch.readFile(sb.id, "ck.txt")), "before\n");
    await hutch.deleteCheckpoint(sb.id, cp.id);
    assert.ok(!(await hutch.checkpoints(sb.id)).some((c) => c.id === cp.id));
    const res = await hutch.forkAll(sb.id, 2);
    assert.equal(res.sandboxes.length, 2, JSON.stringify(res.errors));
    for (const copy of res.sandboxes) {
      assert.equal(copy.metadata.forked_from, sb.id);
      await hutch.deleteSandbox(copy.id, { wait: true });
    }
  });

  test("desktop", async () => {
    // This sandbox's template has no desktop (TestDesktop drives one).
    const d = await hutch.desktop(sb.id);
    assert.equal(d.running, false);
    assert.deepEqual(d.recent_actions, []);
    await assert.rejects(hutch.startDesktop(sb.id), (e) => e.code === "failed_precondition" && /template desktop/.test(e.message));
    await assert.rejects(hutch.desktopActions(sb.id, [{ type: "click", x: 1, y: 1 }]), (e) => e.code === "failed_precondition");
  });

  test("errors", async () => {
    await assert.rejects(hutch.getSandbox("nosuchsandbx"), (e) => e.code === "not_found" && e.status === 404);
    await assert.rejects(new Hutch({ apiKey: "not-a-key" }).listSandboxes(), (e) => e.code === "unauthenticated" && e.status === 401);
  });
});

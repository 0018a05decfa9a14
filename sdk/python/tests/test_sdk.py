"""The Python SDK against a real daemon: $HUTCH_URL and $HUTCH_API_KEY
(make test runs it from test/e2e, on a daemon of its own)."""

import asyncio
import json
import os
import time
import unittest
import urllib.error
import urllib.request
from datetime import datetime

from hutch import AsyncClient, Client, HutchError

HAVE_DAEMON = bool(os.environ.get("HUTCH_URL"))


@unittest.skipUnless(HAVE_DAEMON, "needs a daemon: set HUTCH_URL and HUTCH_API_KEY")
class TestClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = Client()
        cls.sb = cls.client.create_sandbox(runtime=os.environ.get("HUTCH_RUNTIME") or None)

    @classmethod
    def tearDownClass(cls):
        cls.sb.delete(wait=True)
        cls.client.close()

    def test_exec(self):
        r = self.sb.exec("echo out; echo err >&2; exit 7")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (7, "out\n", "err\n"))
        r = self.sb.exec(["cat"], stdin="from stdin")
        self.assertEqual(r.stdout, "from stdin")
        r = self.sb.exec(["sh", "-c", "echo $A in $(pwd)"], env={"A": "x"}, cwd="/tmp")
        self.assertEqual(r.stdout, "x in /tmp\n")

    def test_exec_stream(self):
        events = list(self.sb.exec_stream("echo one; sleep 0.3; echo two >&2; exit 2"))
        self.assertEqual([(e.kind, e.text) for e in events[:-1]], [("stdout", "one\n"), ("stderr", "two\n")])
        self.assertEqual(events[-1].kind, "exit")
        self.assertEqual(events[-1].result.exit_code, 2)
        self.assertGreaterEqual(events[-1].result.duration_ms, 300)

    def test_files(self):
        data = bytes(range(256)) * 3
        entry = self.sb.write_file("sdk/bin.dat", data)
        self.assertEqual((entry["size"], entry["type"]), (768, "file"))
        self.assertEqual(self.sb.read_file("sdk/bin.dat"), data)
        self.assertEqual(self.sb.exec(["sha256sum", "sdk/bin.dat"]).stdout.split()[0],
                         __import__("hashlib").sha256(data).hexdigest())
        self.client.move_file(self.sb.id, "sdk/bin.dat", "sdk/moved.dat")
        self.assertEqual([e["name"] for e in self.sb.list_files("sdk")], ["moved.dat"])
        self.assertEqual(self.client.stat_file(self.sb.id, "sdk/moved.dat")["size"], 768)
        self.client.delete_file(self.sb.id, "sdk/moved.dat")
        with self.assertRaises(HutchError) as cm:
            self.sb.read_file("sdk/moved.dat")
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))

    def test_processes(self):
        p = self.sb.start_process("for i in 1 2 3; do echo tick $i; sleep 0.1; done; sleep 600", name="ticker")
        self.assertEqual(p["name"], "ticker")
        deadline = time.time() + 10
        out = ""
        while "tick 3" not in out and time.time() < deadline:
            events = list(self.client.process_logs(self.sb.id, "ticker"))
            self.assertEqual(events[-1].kind, "end")
            out = "".join(e.text for e in events if e.kind == "stdout")
            time.sleep(0.1)
        self.assertIn("tick 1\ntick 2\ntick 3\n", out)
        self.assertIn("ticker", [q["name"] for q in self.client.list_processes(self.sb.id)])
        self.client.delete_process(self.sb.id, "ticker")
        self.assertNotIn("ticker", [q["name"] for q in self.client.list_processes(self.sb.id)])

    def test_service(self):
        self.sb.write_file("site/index.html", "<h1>hello from the sandbox</h1>")
        svc = self.sb.start_service("python3 -m http.server 8000", 8000, name="web", cwd="/home/user/workspace/site")
        self.assertEqual(svc["name"], "web")
        deadline = time.time() + 20
        while self.client.get_service(self.sb.id, "web")["status"] != "running":
            self.assertLess(time.time(), deadline, "the service never ran")
            time.sleep(0.2)
        link = self.client.service_link(self.sb.id, "web")
        # path_url is on the daemon's own host; url (by host) needs *.localhost
        # to resolve, which a fresh machine may not.
        # Its first visit sets the preview's cookie and redirects.
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(link["path_url"], timeout=20) as res:
            self.assertIn(b"hello from the sandbox", res.read())
        # Revoked, the link opens nothing, by its URL or its cookie.
        self.client.revoke_service_links(self.sb.id, "web")
        for opener, url in ((urllib.request.build_opener(), link["path_url"]), (browser, link["path_url"].split("?")[0])):
            with self.assertRaises(urllib.error.HTTPError) as e:
                opener.open(url, timeout=20)
            self.assertEqual(e.exception.code, 401)
        self.client.delete_service(self.sb.id, "web")

    def test_tools(self):
        anthropic = self.client.list_tools()
        self.assertTrue(all({"name", "description", "input_schema"} <= set(t) for t in anthropic))
        openai = self.client.list_tools("openai")
        self.assertEqual({t["type"] for t in openai}, {"function"})
        self.assertEqual(sorted(t["function"]["name"] for t in openai), sorted(t["name"] for t in anthropic))
        self.sb.write_file("tool.txt", "line one\nline two\n")
        self.assertIn("sandbox_read_file", {t["name"] for t in anthropic})
        res = self.sb.run_tool("sandbox_read_file", {"path": "tool.txt"})
        self.assertEqual(res["status"], "success", res)
        self.assertIn("line two", json.dumps(res["result"]))

    def test_secret_values_never_come_back(self):
        name = "SDK_TEST_TOKEN"
        value = "s3cr3t-" + str(time.time_ns())
        try:
            self.client.set_secret(name, value, description="from the Python SDK's tests")
            listed = self.client.list_secrets()
            self.assertIn(name, [s["name"] for s in listed])
            self.assertNotIn(value, json.dumps(listed))
        finally:
            self.client.delete_secret(name)
        self.assertNotIn(name, [s["name"] for s in self.client.list_secrets()])

    def test_metrics(self):
        # The daemon samples every 0.5 s (test/e2e): two samples come soon.
        deadline = time.time() + 30
        while len((m := self.client.metrics(self.sb.id))["samples"]) < 2:
            self.assertLess(time.time(), deadline, f"fewer than two samples in 30 s: {m}")
            time.sleep(0.2)
        self.assertGreater(m["interval_s"], 0)
        last = m["samples"][-1]
        self.assertEqual(set(last), {"time", "cpu_percent", "cpus", "memory_bytes", "memory_limit_bytes", "disk_used_bytes",
                                     "disk_limit_bytes", "pids", "network_bytes_in", "network_bytes_out"})
        self.assertEqual((last["cpus"], last["memory_limit_bytes"], last["disk_limit_bytes"]),
                         (self.sb.info["cpus"], self.sb.info["memory_mb"] << 20, self.sb.info["disk_mb"] << 20))
        self.assertGreater(last["cpus"], 0)
        self.assertGreater(last["memory_bytes"], 0)
        self.assertGreaterEqual(last["cpu_percent"], 0)
        self.assertGreaterEqual(last["pids"], 1)
        times = [datetime.fromisoformat(s["time"]) for s in m["samples"]]
        self.assertEqual(times, sorted(times))
        self.assertIsNotNone(times[-1].tzinfo)
        # A sample's time is to the millisecond: since is exact.
        later = self.client.metrics(self.sb.id, since=times[-1])
        self.assertTrue(all(datetime.fromisoformat(s["time"]) > times[-1] for s in later["samples"]), later)

    def test_desktop(self):
        # This sandbox's template has no desktop (TestDesktop drives one).
        d = self.client.desktop(self.sb.id)
        self.assertFalse(d["running"])
        with self.assertRaises(HutchError) as cm:
            self.sb.start_desktop()
        self.assertEqual(cm.exception.code, "failed_precondition")
        self.assertIn("template desktop", str(cm.exception))
        with self.assertRaises(HutchError) as cm:
            self.sb.desktop_actions([{"type": "click", "x": 1, "y": 1}], screenshot=True)
        self.assertEqual(cm.exception.code, "failed_precondition")

    def test_checkpoints(self):
        self.sb.write_file("ck.txt", "before\n")
        cp = self.sb.checkpoint(name="sdk")
        self.assertTrue(cp["id"].startswith("c"))
        self.sb.write_file("ck.txt", "after\n")
        diff = self.sb.checkpoint_diff(cp["id"])
        self.assertIn(("/home/user/workspace/ck.txt", "changed"), [(c["path"], c["kind"]) for c in diff["changes"]])
        unified = self.sb.checkpoint_diff(cp["id"], "/home/user/workspace/ck.txt")["unified"]
        self.assertIn("-before\n+after\n", unified)
        self.assertIn(cp["id"], [c["id"] for c in self.sb.checkpoints()])
        back = self.sb.rollback(cp["id"])
        self.assertEqual(back.info["state"], "running")
        self.assertEqual(self.sb.read_file("ck.txt"), b"before\n")
        self.client.delete_checkpoint(self.sb.id, cp["id"])
        self.assertNotIn(cp["id"], [c["id"] for c in self.sb.checkpoints()])

    def test_fork(self):
        res = self.sb.fork(2)
        self.assertEqual((len(res["sandboxes"]), res.get("errors", [])), (2, []))
        for copy in res["sandboxes"]:
            self.assertEqual(copy["metadata"]["forked_from"], self.sb.id)
            self.client.delete_sandbox(copy["id"], wait=True)

    def test_whoami(self):
        me = self.client.whoami()
        self.assertTrue(me["admin"])
        self.assertIn(me["defaults"]["network_mode"], ("none", "allowlist", "full"))

    def test_errors(self):
        with self.assertRaises(HutchError) as cm:
            self.client.get_sandbox("nosuchsandbx")
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(HutchError) as cm:
            self.client.create_sandbox(memory_mb=-1)
        self.assertEqual((cm.exception.code, cm.exception.status), ("invalid_argument", 400))
        with self.assertRaises(HutchError) as cm, Client(api_key="not-a-key") as stranger:
            stranger.list_sandboxes()
        self.assertEqual((cm.exception.code, cm.exception.status), ("unauthenticated", 401))


@unittest.skipUnless(HAVE_DAEMON, "needs a daemon: set HUTCH_URL and HUTCH_API_KEY")
class TestAsyncClient(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = AsyncClient()
        self.sb = await self.client.create_sandbox(runtime=os.environ.get("HUTCH_RUNTIME") or None)

    async def asyncTearDown(self):
        await self.sb.delete(wait=True)
        await self.client.close()

    async def test_exec_and_files(self):
        r = await self.sb.exec(["sh", "-c", "echo async; exit 4"])
        self.assertEqual((r.exit_code, r.stdout), (4, "async\n"))
        await self.sb.write_file("a/b.txt", "async file")
        self.assertEqual(await self.sb.read_file("a/b.txt"), b"async file")
        self.assertEqual([e["name"] for e in await self.sb.list_files("a")], ["b.txt"])

    async def test_stream(self):
        out = {"stdout": "", "stderr": ""}
        kinds = []
        async for ev in self.client.exec_stream(self.sb.id, "echo a; echo b >&2; echo c; exit 1"):
            kinds.append(ev.kind)
            if ev.kind in out:
                out[ev.kind] += ev.text
        # stdout and stderr are two pipes: their order between them is not kept.
        self.assertEqual(out, {"stdout": "a\nc\n", "stderr": "b\n"})
        self.assertEqual(kinds[-1], "exit")
        self.assertEqual(kinds.count("exit"), 1)

    async def test_concurrent(self):
        results = await asyncio.gather(*(self.sb.exec(["sh", "-c", f"sleep 0.2; echo {i}"]) for i in range(8)))
        self.assertEqual([r.stdout for r in results], [f"{i}\n" for i in range(8)])

    async def test_error(self):
        with self.assertRaises(HutchError) as cm:
            await self.client.get_sandbox("nosuchsandbx")
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))


if __name__ == "__main__":
    unittest.main()

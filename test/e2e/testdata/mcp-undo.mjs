// An MCP client made with the official TypeScript SDK, for TestMCPUndo:
// over streamable HTTP (/mcp) it creates a sandbox with checkpoints per
// tool call, makes three tool calls that change files, undoes the second
// with sandbox_rollback (scope call), and prints what it saw as one JSON
// object.
//
//   node mcp-undo.mjs URL
//
// HUTCH_API_KEY comes from the environment.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.HUTCH_API_KEY}` } },
});
const client = new Client({ name: "hutch-e2e-undo", version: "1.0.0" });
await client.connect(transport);
const text = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const call = async (name, args) => {
  console.error(`calling ${name}`);
  const res = await client.callTool({ name, arguments: args });
  return { isError: !!res.isError, text: text(res) };
};

const created = await call("sandbox_create", { checkpoints: "per_tool_call" });
const id = JSON.parse(created.text).sandbox_id;
const first = await call("sandbox_write_file", { sandbox_id: id, path: "first.txt", content: "one\n" });
const second = await call("sandbox_run_command", {
  sandbox_id: id, command: "echo two > second.txt && echo changed >> first.txt && rm -f /home/user/.profile-none",
});
const third = await call("sandbox_write_file", { sandbox_id: id, path: "third.txt", content: "three\n" });
const undo = JSON.parse(second.text).undo_checkpoint;
const undone = await call("sandbox_rollback", { sandbox_id: id, checkpoint: undo, scope: "call" });
const after = await call("sandbox_run_command", {
  sandbox_id: id, command: "cat first.txt; test -e second.txt && echo second-there || echo second-gone; cat third.txt",
});
const diff = await call("sandbox_diff", { sandbox_id: id, checkpoint: JSON.parse(first.text).undo_checkpoint });
await client.close();

console.log(JSON.stringify({ id, first, second, third, undone, after, diff }));

// An MCP client made with the official TypeScript SDK, for TestMCP: it
// connects to Hutch over stdio (`hutch mcp`) or streamable HTTP (/mcp),
// creates a sandbox, writes and reads a file in it, fails a read and a
// command, lists sandboxes, calls every other tool once, runs code twice,
// and prints what it saw as one JSON object.
//
//   node mcp-client.mjs stdio HUTCH_BINARY
//   node mcp-client.mjs http URL
//
// HUTCH_URL and HUTCH_API_KEY come from the environment.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target] = process.argv.slice(2);
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: target, args: ["mcp"], env: process.env })
  : new StreamableHTTPClientTransport(new URL(target), {
      requestInit: { headers: { Authorization: `Bearer ${process.env.HUTCH_API_KEY}` } },
    });
const client = new Client({ name: "hutch-e2e", version: "1.0.0" });
await client.connect(transport);
// Each call is named on stderr first: a call that hangs shows which.
const callTool = client.callTool.bind(client);
client.callTool = (req) => {
  console.error(`calling ${req.name}`);
  return callTool(req);
};

const text = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const tools = await client.listTools();
const created = await client.callTool({ name: "sandbox_create", arguments: {} });
const id = JSON.parse(text(created)).sandbox_id;
const write = await client.callTool({
  name: "sandbox_write_file",
  arguments: { sandbox_id: id, path: "mcp.txt", content: `over ${mode}\n` },
});
const read = await client.callTool({ name: "sandbox_read_file", arguments: { sandbox_id: id, path: "mcp.txt" } });
const missing = await client.callTool({ name: "sandbox_read_file", arguments: { sandbox_id: id, path: "nope.txt" } });
const command = await client.callTool({ name: "sandbox_run_command", arguments: { sandbox_id: id, command: "exit 4" } });
const listed = await client.callTool({ name: "sandbox_list", arguments: {} });
// Every other tool once, in the sandbox made above.
const others = {};
for (const [name, args] of [
  ["sandbox_find_replace", { path: "mcp.txt", find: "over", replace: "via" }],
  ["sandbox_apply_patch", { patch: "*** Begin Patch\n*** Add File: added.txt\n+added\n*** End Patch\n" }],
  ["sandbox_list_directory", {}],
  ["sandbox_grep_files", { pattern: "via" }],
  ["sandbox_find_files", { query: "added" }],
  ["sandbox_download_url", { path: "added.txt" }],
  ["sandbox_delete_file", { path: "added.txt" }],
]) {
  const res = await client.callTool({ name, arguments: { sandbox_id: id, ...args } });
  others[name] = { isError: !!res.isError, text: text(res) };
}
// sandbox_run_code keeps its state from call to call, and what the code
// displays as an image comes back as image content (a 2x3 PNG here).
const setX = await client.callTool({ name: "sandbox_run_code", arguments: { sandbox_id: id, code: "x = 41" } });
const code = await client.callTool({
  name: "sandbox_run_code",
  arguments: {
    sandbox_id: id,
    code: "import base64\nfrom IPython.display import Image, display\n" +
      "display(Image(data=base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAIAAAA2iEnWAAAAEUlEQVR4nGP4z8AARGACTgMAPtYF+1iCz0YAAAAASUVORK5CYII=')))\nx + 1",
  },
});
await client.close();

console.log(JSON.stringify({
  tools: tools.tools.map((t) => t.name),
  readFileRequires: tools.tools.find((t) => t.name === "sandbox_read_file").inputSchema.required,
  id,
  write: { isError: !!write.isError, text: text(write) },
  read: { isError: !!read.isError, text: text(read) },
  missing: { isError: !!missing.isError, text: text(missing) },
  command: { isError: !!command.isError, text: text(command) },
  listed: text(listed),
  others,
  code: {
    isError: !!(setX.isError || code.isError),
    text: text(setX) + "\n" + text(code),
    images: code.content.filter((c) => c.type === "image").map((c) => ({ mimeType: c.mimeType, data: c.data })),
  },
}));

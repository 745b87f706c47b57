// A minimal MCP server over stdio (newline-delimited JSON-RPC) with one tool, `echo`.
import { createInterface } from "node:readline";

const tool = {
  name: "echo",
  description: "Echo a note.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};
const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
createInterface({ input: process.stdin }).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  const reply = (result) => send({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      return reply({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "echo-notes", version: "1" } });
    case "tools/list":
      return reply({ tools: [tool] });
    case "tools/call":
      return reply({ content: [{ type: "text", text: `note: ${msg.params.arguments?.text ?? ""}` }] });
    default:
      return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "unknown method" } });
  }
});

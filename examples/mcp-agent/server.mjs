#!/usr/bin/env node
// notes: a small MCP server over stdio (newline-delimited JSON-RPC, no dependencies) that keeps notes in memory,
// filed by folder. Two tools: add_note(folder, title, text) and list_notes(folder).
import { createInterface } from "node:readline";

const notes = new Map(); // folder -> [{ title, text }]
const tools = [
  {
    name: "add_note",
    description: "File a note in a folder.",
    inputSchema: {
      type: "object",
      properties: {
        folder: { type: "string", description: "The folder to file it in." },
        title: { type: "string" },
        text: { type: "string" },
      },
      required: ["folder", "title", "text"],
    },
  },
  {
    name: "list_notes",
    description: "List the notes of a folder.",
    inputSchema: {
      type: "object",
      properties: { folder: { type: "string" } },
      required: ["folder"],
    },
  },
];
const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const text = (t) => ({ content: [{ type: "text", text: t }] });

createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "parse error" } });
  }
  if (msg.id === undefined) return; // notifications
  const reply = (result) => send({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      return reply({
        protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "notes", version: "1" },
      });
    case "tools/list":
      return reply({ tools });
    case "tools/call": {
      const { name, arguments: args = {} } = msg.params;
      if (name === "add_note") {
        const list = notes.get(args.folder) ?? [];
        list.push({ title: args.title, text: args.text });
        notes.set(args.folder, list);
        return reply(text(`filed "${args.title}" in ${args.folder} (${list.length} notes there)`));
      }
      if (name === "list_notes") {
        const list = notes.get(args.folder) ?? [];
        return reply(text(list.length ? list.map((n) => `- ${n.title}: ${n.text}`).join("\n") : `${args.folder} is empty`));
      }
      return reply({ isError: true, ...text(`no tool named ${name}`) });
    }
    default:
      return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `unknown method ${msg.method}` } });
  }
});

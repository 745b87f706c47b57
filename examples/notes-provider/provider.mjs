#!/usr/bin/env node
// A loom provider (runtime/PROVIDERS.md, protocol loom-provider/1): JSON-RPC 2.0, one JSON object per line on
// stdin/stdout. It contributes three tools over one notes file, `notes.md`, in the data directory loom gives it at
// `initialize` (dataDir: a folder of the agent's storage, outside the project), and a storage session layer,
// `history`, keeping each session's events as JSON lines in `history-<session>.jsonl` there. Node standard library
// only.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

const PROTOCOL = "loom-provider/1";
let notesFile = null;
let dataDir = null;

const TOOLS = [
  {
    name: "note_add",
    description: "Remember a note (one line of text) for later sessions.",
    inputSchema: {
      type: "object",
      properties: { text: { type: "string", description: "What to remember." } },
      required: ["text"],
    },
  },
  {
    name: "note_list",
    description: "List every remembered note, oldest first.",
    inputSchema: { type: "object", properties: {} },
  },
  {
    name: "note_search",
    description: "List the notes that contain a word or phrase (case-insensitive).",
    inputSchema: {
      type: "object",
      properties: { query: { type: "string", description: "The word or phrase." } },
      required: ["query"],
    },
  },
];

function readNotes() {
  if (!existsSync(notesFile)) return [];
  return readFileSync(notesFile, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("- "))
    .map((l) => l.slice(2));
}

function text(t, isError = false) {
  return { content: [{ type: "text", text: t }], isError };
}

function call(name, args) {
  switch (name) {
    case "note_add": {
      const note = String(args.text ?? "").replace(/\s+/g, " ").trim();
      if (!note) return text("note_add needs a non-empty `text`", true);
      appendFileSync(notesFile, `- ${note}\n`);
      return text(`remembered (${readNotes().length} notes)`);
    }
    case "note_list": {
      const notes = readNotes();
      return text(notes.length ? notes.map((n) => `- ${n}`).join("\n") : "(no notes yet)");
    }
    case "note_search": {
      const q = String(args.query ?? "").toLowerCase();
      const hits = readNotes().filter((n) => n.toLowerCase().includes(q));
      return text(hits.length ? hits.map((n) => `- ${n}`).join("\n") : `(no note mentions "${args.query}")`);
    }
    default:
      return null;
  }
}

function send(msg) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
}

function handle(msg) {
  const { id, method, params = {} } = msg;
  if (id === undefined) return; // notifications (initialized, cancelled): nothing to do, every call is quick
  if (method === "initialize") {
    if (params.protocolVersion !== PROTOCOL) {
      return send({ id, error: { code: -32602, message: `this provider speaks ${PROTOCOL}` } });
    }
    mkdirSync(params.dataDir, { recursive: true });
    dataDir = params.dataDir;
    notesFile = join(dataDir, "notes.md");
    return send({
      id,
      result: {
        protocolVersion: PROTOCOL,
        serverInfo: { name: "notes-provider", version: "1.0.0" },
        contributes: { tools: TOOLS, sessions: ["history"], harnesses: [] },
      },
    });
  }
  if (method === "tools/call") {
    if (!notesFile) return send({ id, error: { code: -32002, message: "not initialized" } });
    const result = call(params.name, params.arguments ?? {});
    if (!result) return send({ id, error: { code: -32602, message: `no tool ${params.name}` } });
    return send({ id, result });
  }
  if (method === "session/load" || method === "session/append") {
    if (!dataDir) return send({ id, error: { code: -32002, message: "not initialized" } });
    if (params.layer !== "history") return send({ id, error: { code: -32602, message: `no layer ${params.layer}` } });
    const file = join(dataDir, `history-${String(params.session).replace(/[^A-Za-z0-9_.-]/g, "_")}.jsonl`);
    if (method === "session/append") {
      appendFileSync(file, params.messages.map((m) => JSON.stringify(m) + "\n").join(""));
      return send({ id, result: {} });
    }
    const lines = existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
    return send({ id, result: { messages: lines.map((l) => JSON.parse(l)) } });
  }
  send({ id, error: { code: -32601, message: `no method ${method}` } });
}

createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    process.stderr.write(`notes-provider: not JSON: ${line.slice(0, 80)}\n`);
    return;
  }
  try {
    handle(msg);
  } catch (e) {
    if (msg.id !== undefined) send({ id: msg.id, error: { code: -32603, message: String(e?.message ?? e) } });
  }
});

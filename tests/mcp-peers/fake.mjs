// A deliberately misbehaving MCP server (stdio, or HTTP with `http <port-file>`), for tests/runtime/mcp.rs.
// Usage: node fake.mjs <mode> [arg]
//   hang-start   never answers initialize
//   hang-call    answers initialize and tools/list, never answers tools/call
//   crash        exits (status 3, with a line on stderr) on its first tools/call; a restarted one works
//   malformed    lists `broken` with an input schema that is not an object, and a good `ok`
//   big          answers tools/call with a 10 MB text result
//   paged        lists `a` and `b` one per page (nextCursor)
//   changing     lists `a` and `b`; after the first call, drops `b` and sends notifications/tools/list_changed
//   http-404     Streamable HTTP on a free port (written to [arg]); forgets every session after each tools/call;
//                POST /redirect answers 307
//   http-notify  the same without forgetting; its GET stream drops `b` and sends notifications/tools/list_changed
// With FAKE_PIDFILE set, a stdio server writes its pid there.
import { createServer } from "node:http";
import { writeFileSync, existsSync } from "node:fs";

const mode = process.argv[2] ?? "hang-call";
const marker = process.argv[3];
const schema = { type: "object", properties: { text: { type: "string" } } };
let tools = [
  { name: "a", description: "tool a", inputSchema: schema },
  { name: "b", description: "tool b", inputSchema: schema },
];
if (mode === "malformed") {
  tools = [
    { name: "broken", description: "bad schema", inputSchema: "not a schema" },
    { name: "ok", description: "fine", inputSchema: schema },
  ];
}
let calls = 0;

// returns [reply or null, notifications to send after]
function answer(msg) {
  const reply = (result) => ({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      if (mode === "hang-start") return [null, []];
      return [reply({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: { listChanged: true } }, serverInfo: { name: "fake", version: "0" } }), []];
    case "tools/list": {
      if (mode !== "paged") return [reply({ tools }), []];
      // one tool per page, the cursor is the next index
      const at = Number(msg.params?.cursor ?? 0);
      const page = { tools: tools.slice(at, at + 1) };
      if (at + 1 < tools.length) page.nextCursor = String(at + 1);
      return [reply(page), []];
    }
    case "tools/call": {
      calls += 1;
      const text = JSON.stringify(msg.params.arguments ?? {});
      if (mode === "hang-call") return [null, []];
      if (mode === "crash") {
        // marker file: the first server process crashes, the restarted one answers
        if (marker && !existsSync(marker)) {
          writeFileSync(marker, "crashed");
          process.stderr.write("fake: simulated crash in tools/call\n");
          process.exit(3);
        }
        return [reply({ content: [{ type: "text", text: `after restart: ${text}` }] }), []];
      }
      if (mode === "big") return [reply({ content: [{ type: "text", text: "x".repeat(10 * 1024 * 1024) }] }), []];
      if (mode === "changing" && calls === 1) {
        tools = tools.filter((t) => t.name !== "b");
        return [reply({ content: [{ type: "text", text: `called ${msg.params.name}` }] }), [{ jsonrpc: "2.0", method: "notifications/tools/list_changed" }]];
      }
      return [reply({ content: [{ type: "text", text: `${msg.params.name} got ${text}` }] }), []];
    }
    default:
      if (msg.id === undefined) return [null, []];
      return [{ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "unknown method" } }, []];
  }
}

if (mode.startsWith("http-")) {
  let session = 0;
  let live = null;
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.method === "DELETE") { res.writeHead(200).end(); return; }
      if (req.url === "/redirect") { res.writeHead(307, { location: "/mcp" }).end(); return; }
      const sid = req.headers["mcp-session-id"];
      if (req.method === "GET") {
        if (mode !== "http-notify" || sid !== live) { res.writeHead(405).end(); return; }
        // the server's own stream: it drops `b` and says so, then keeps the stream open
        tools = tools.filter((t) => t.name !== "b");
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write('data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n');
        return;
      }
      const msg = JSON.parse(body);
      if (msg.method !== "initialize" && sid !== live) {
        res.writeHead(404).end("unknown session");
        return;
      }
      const headers = { "content-type": "application/json" };
      if (msg.method === "initialize") {
        session += 1;
        live = `s${session}`;
        headers["mcp-session-id"] = live;
      }
      const [r] = answer(msg);
      if (!r) { res.writeHead(202).end(); return; }
      if (msg.method === "tools/call" && mode === "http-404") {
        // the reply names the session it was served in, then the session is forgotten
        r.result.content[0].text += ` in session ${live}`;
        live = null;
      }
      res.writeHead(200, headers).end(JSON.stringify(r));
    });
  });
  server.listen(0, "127.0.0.1", () => writeFileSync(marker, String(server.address().port)));
} else {
  // for the process-group test: where a grandchild of loom's child can be found
  // (and it outlives its stdin closing, as a careless server would: only a kill ends it)
  if (process.env.FAKE_PIDFILE) {
    writeFileSync(process.env.FAKE_PIDFILE, String(process.pid));
    setInterval(() => {}, 1000);
  }
  let buf = "";
  process.stdin.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      const [r, notes] = answer(JSON.parse(line));
      // notifications first: the client sees them before the reply it waits for
      for (const n of notes) process.stdout.write(JSON.stringify(n) + "\n");
      if (r) process.stdout.write(JSON.stringify(r) + "\n");
    }
  });
}

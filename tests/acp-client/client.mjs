// A real ACP client (@agentclientprotocol/sdk) driving `loom acp serve`, for tests/runtime/acp.rs.
//
// usage: node client.mjs <loom binary> <plain manifest> <ask manifest> <session cwd> <durable manifest> <fs manifest>
//        <terminal manifest> <terminal session cwd>
//
// The plain agent reads a file with read_file; the ask agent has a [permissions] ask rule on read_file, so each of
// its turns sends session/request_permission: the client allows once, rejects once, then cancels the turn while the
// question is open. The durable agent keeps its session in a file log: one process writes a turn, a second process
// loads the session (the history is replayed before the answer) and continues it. The fs agent runs with a client
// that advertises fs.readTextFile / fs.writeTextFile and keeps "editor buffers" of its own. The terminal agent runs
// with a client that advertises terminals and really runs what terminal/create hands it (a process group per
// terminal, killed on terminal/kill). Prints one JSON summary on stdout; the Rust test asserts on it. Exits 1 only when the client
// itself fails (the summary then says why).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [loom, plainManifest, askManifest, cwd, durableManifest, fsManifest, termManifest, termCwd] =
  process.argv.slice(2);
const debug = (...a) => process.env.ACP_DEBUG && console.error("acp-client:", ...a);

/** Starts `loom acp serve <manifest>`, runs `script` with a connected client, then closes stdin. */
async function withAgent(manifest, script) {
  const child = spawn(loom, ["acp", "serve", manifest], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const state = { onPermission: null, permissions: [], fs: [], buffers: {}, terminals: {}, calls: [], onWait: null };
  const app = acp
    .client({ name: "loom-acp-test" })
    .onNotification("session/update", ({ params }) => {
      updates.push(params);
    })
    .onRequest("session/request_permission", async ({ params, agent }) => {
      debug("permission asked", JSON.stringify(params));
      state.permissions.push(params);
      return state.onPermission(params, agent);
    })
    .onRequest("fs/read_text_file", async ({ params }) => {
      state.fs.push({ method: "fs/read_text_file", path: params.path });
      if (!(params.path in state.buffers)) throw acp.RequestError.resourceNotFound(params.path);
      return { content: state.buffers[params.path] };
    })
    .onRequest("fs/write_text_file", async ({ params }) => {
      state.fs.push({ method: "fs/write_text_file", path: params.path, content: params.content });
      state.buffers[params.path] = params.content;
      return {};
    })
    .onRequest("terminal/create", async ({ params }) => {
      const id = `term-${Object.keys(state.terminals).length + 1}`;
      state.calls.push({ method: "terminal/create", terminalId: id, command: params.command, args: params.args });
      const env = { ...process.env };
      for (const e of params.env || []) env[e.name] = e.value;
      const child = spawn(params.command, params.args || [], { cwd: params.cwd || undefined, env, detached: true });
      const t = { child, output: "", exit: null };
      child.stdout.on("data", (d) => (t.output += d));
      child.stderr.on("data", (d) => (t.output += d));
      t.exited = new Promise((resolve) =>
        child.on("close", (exitCode, signal) => {
          t.exit = { exitCode, signal };
          resolve(t.exit);
        }),
      );
      // ended: the process exited, whether or not something it started still holds its output open (nothing should:
      // SECURITY.md, "loom killed while bubblewrap starts"; but a stray must not hang the client); exited also waits
      // for the output
      t.ended = new Promise((resolve) => child.on("exit", (exitCode, signal) => resolve({ exitCode, signal })));
      state.terminals[id] = t;
      return { terminalId: id };
    })
    .onRequest("terminal/output", async ({ params }) => {
      state.calls.push({ method: "terminal/output", terminalId: params.terminalId });
      const t = state.terminals[params.terminalId];
      return { output: t.output, truncated: false, exitStatus: t.exit };
    })
    .onRequest("terminal/wait_for_exit", async ({ params, agent }) => {
      state.calls.push({ method: "terminal/wait_for_exit", terminalId: params.terminalId });
      if (state.onWait) await state.onWait(params, agent);
      return await state.terminals[params.terminalId].exited;
    })
    .onRequest("terminal/kill", async ({ params }) => {
      state.calls.push({ method: "terminal/kill", terminalId: params.terminalId });
      const t = state.terminals[params.terminalId];
      if (!t.exit) process.kill(-t.child.pid, "SIGKILL");
      const ended = await t.ended;
      if (!t.exit) t.exit = ended;
      return {};
    })
    .onRequest("terminal/release", async ({ params }) => {
      state.calls.push({ method: "terminal/release", terminalId: params.terminalId });
      const t = state.terminals[params.terminalId];
      if (!t.exit) process.kill(-t.child.pid, "SIGKILL");
      return {};
    });
  let result;
  let error = null;
  try {
    result = await app.connectWith(stream, (ctx) => script(ctx, updates, state));
  } catch (e) {
    error = String(e && e.stack ? e.stack : e);
  }
  debug("script done", error);
  child.stdin.end();
  const exit = await exited;
  debug("exited", exit, stderr);
  return { result, error, exitCode: exit.code, signal: exit.signal, stderr };
}

/** What a turn streamed: update kinds (in order), tool statuses, the agent's text. */
function digest(updates, sessionId) {
  const mine = updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  const toolResults = mine
    .filter((u) => u.sessionUpdate === "tool_call_update" && u.status !== "in_progress")
    .map((u) => ({
      status: u.status,
      text: (u.content || []).map((c) => (c.content && c.content.text) || "").join(""),
    }));
  return {
    kinds: mine.map((u) => u.sessionUpdate),
    toolCalls: mine.filter((u) => u.sessionUpdate === "tool_call").map((u) => u.title),
    toolResults,
    text: mine
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text)
      .join(""),
  };
}

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
}

const summary = {};

summary.plain = await withAgent(plainManifest, async (ctx, updates) => {
  const init = await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  const { sessionId, configOptions } = await ctx.request("session/new", { cwd, mcpServers: [] });
  const prompt = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "read a.txt" }],
  });
  // the model is a config option: the manifest's model can be set, any other is refused
  const modelSet = await ctx.request("session/set_config_option", { sessionId, configId: "model", value: "test" });
  const otherModel = await errorOf(
    ctx.request("session/set_config_option", { sessionId, configId: "model", value: "claude-opus" }),
  );
  const second = await ctx.request("session/new", { cwd, mcpServers: [] });
  const mcp = await errorOf(
    ctx.request("session/new", {
      cwd,
      mcpServers: [{ name: "fs", command: "/bin/true", args: [], env: [] }],
    }),
  );
  const unknown = await errorOf(
    ctx.request("session/prompt", { sessionId: "no-such-session", prompt: [{ type: "text", text: "x" }] }),
  );
  return {
    protocolVersion: init.protocolVersion,
    agentCapabilities: init.agentCapabilities,
    sessionId,
    configOptions,
    modelSet: modelSet.configOptions,
    otherModel,
    secondSessionId: second.sessionId,
    stopReason: prompt.stopReason,
    turn: digest(updates, sessionId),
    mcp,
    unknown,
  };
});

summary.ask = await withAgent(askManifest, async (ctx, updates, state) => {
  await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const { sessionId } = await ctx.request("session/new", { cwd, mcpServers: [] });
  const turn = async (answer) => {
    state.onPermission = answer;
    debug("turn");
    const before = updates.length;
    const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "read a.txt" }] });
    return { stopReason: r.stopReason, ...digest(updates.slice(before), sessionId) };
  };
  const allowed = await turn(() => ({ outcome: { outcome: "selected", optionId: "allow_once" } }));
  const rejected = await turn(() => ({ outcome: { outcome: "selected", optionId: "reject_once" } }));
  // the user cancels the turn while the question is open; per ACP the open question is then answered `cancelled`
  const cancelled = await turn(async (params, agent) => {
    await agent.notify("session/cancel", { sessionId: params.sessionId });
    return { outcome: { outcome: "cancelled" } };
  });
  return {
    sessionId,
    options: state.permissions.map((p) => p.options.map((o) => o.kind)),
    askedTools: state.permissions.map((p) => p.toolCall.title),
    allowed,
    rejected,
    cancelled,
  };
});

summary.written = await withAgent(durableManifest, async (ctx) => {
  const init = await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const { sessionId } = await ctx.request("session/new", { cwd, mcpServers: [] });
  const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "first prompt" }] });
  return { loadSession: init.agentCapabilities.loadSession, sessionId, stopReason: r.stopReason };
});

summary.loaded = await withAgent(durableManifest, async (ctx, updates) => {
  const init = await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const sessionId = summary.written.result && summary.written.result.sessionId;
  const unknown = await errorOf(ctx.request("session/load", { sessionId: "not-stored", cwd, mcpServers: [] }));
  const loaded = await ctx.request("session/load", { sessionId, cwd, mcpServers: [] });
  // every replayed update arrived before the answer
  const replay = digest(updates, sessionId);
  const userText = updates
    .filter((n) => n.update.sessionUpdate === "user_message_chunk")
    .map((n) => n.update.content.text);
  const before = updates.length;
  const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "second prompt" }] });
  return {
    loadSession: init.agentCapabilities.loadSession,
    modes: loaded.modes,
    unknown,
    replay,
    userText,
    stopReason: r.stopReason,
    continued: digest(updates.slice(before), sessionId),
  };
});

summary.fs = await withAgent(fsManifest, async (ctx, updates, state) => {
  await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  const { sessionId } = await ctx.request("session/new", { cwd, mcpServers: [] });
  state.buffers[`${cwd}/a.txt`] = "from the buffer\n";
  const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "go" }] });
  return { stopReason: r.stopReason, fs: state.fs, buffers: state.buffers, turn: digest(updates, sessionId) };
});

summary.terminal = await withAgent(termManifest, async (ctx, updates, state) => {
  await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: { terminal: true } });
  const { sessionId } = await ctx.request("session/new", { cwd: termCwd, mcpServers: [] });
  const turn = async (text) => {
    const before = updates.length;
    const firstCall = state.calls.length;
    const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    const mine = updates.slice(before).filter((n) => n.sessionId === sessionId).map((n) => n.update);
    return {
      stopReason: r.stopReason,
      ...digest(updates.slice(before), sessionId),
      embedded: mine.flatMap((u) => (Array.isArray(u.content) ? u.content : []).filter((c) => c.type === "terminal").map((c) => c.terminalId)),
      calls: state.calls.slice(firstCall),
    };
  };
  const inside = await turn("inside");
  const outside = await turn("outside");
  // the user cancels while the command runs: the terminal is killed, then released
  state.onWait = async (params, agent) => {
    state.onWait = null;
    await agent.notify("session/cancel", { sessionId: params.sessionId });
  };
  const cancelled = await turn("sleep");
  const exits = Object.fromEntries(Object.entries(state.terminals).map(([id, t]) => [id, t.exit]));
  return { inside, outside, cancelled, exits };
});

const ok = !summary.plain.error && !summary.ask.error && !summary.written.error && !summary.loaded.error && !summary.fs.error && !summary.terminal.error;
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(ok ? 0 : 1);

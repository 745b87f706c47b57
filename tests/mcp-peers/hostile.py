#!/usr/bin/env python3
"""A hostile MCP server over stdio (standard library only), for the client's deadline, bound and lock tests.

Usage: python3 hostile.py <mode> [pid-file]
  ok           answers everything; tools/call `a` answers "a got <n> chars" (n = len of arguments.text)
  chatty       as ok, but before every answer sends 300 notifications, 300 log lines on stdout and 1 MiB on stderr
  flood-start  never answers initialize: floods notifications, stdout log lines and stderr forever
  flood-call   starts normally; on tools/call floods the same way forever, never answering
  no-read      starts normally, then never reads stdin again (and never answers)
  giant-line   starts normally; on tools/call writes one endless line (no newline, ever)
  ask          on tools/call asks loom `roots/list` and `ping`, waits for both replies, then answers with them
  ask-flood    on tools/call sends `ping` requests forever and never reads stdin again
  http <port-file>  Streamable HTTP on a free port (written to the file): tools/call `a` answers with one endless SSE
               event, `b` with an endless stream of notifications, `c` normally
With a pid-file, each process appends its pid to it at start (so a test can count restarts).
"""
import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
if len(sys.argv) > 2 and MODE != "http":
    with open(sys.argv[2], "a") as f:
        f.write(f"{os.getpid()}\n")

OUT = sys.stdout.buffer
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
TOOLS = [{"name": "a", "description": "tool a", "inputSchema": SCHEMA}]


def send(msg):
    OUT.write(json.dumps(msg).encode() + b"\n")
    OUT.flush()


def chatter(forever):
    n = 0
    while forever or n < 300:
        n += 1
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "info", "data": f"busy {n}"}})
        OUT.write(f"log line {n}: working hard\n".encode())
        OUT.flush()
        if forever or n == 1:
            sys.stderr.buffer.write(b"e" * (1024 * 1024 if not forever else 4096) + b"\n")
            sys.stderr.buffer.flush()


def lines():
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return
        if line.strip():
            yield json.loads(line)


def reply(msg, result):
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


def text(msg, t):
    reply(msg, {"content": [{"type": "text", "text": t}]})


def main():
    incoming = lines()
    for msg in incoming:
        method = msg.get("method")
        if "id" not in msg or method is None:
            continue
        if MODE == "chatty":
            chatter(False)
        if method == "initialize":
            if MODE == "flood-start":
                chatter(True)
            reply(msg, {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile", "version": "0"}})
        elif method == "tools/list":
            reply(msg, {"tools": TOOLS})
            if MODE == "no-read":
                while True:
                    time.sleep(3600)
        elif method == "tools/call":
            args = msg["params"].get("arguments") or {}
            if MODE == "flood-call":
                chatter(True)
            elif MODE == "giant-line":
                chunk = b"x" * 65536
                while True:
                    OUT.write(chunk)
                    OUT.flush()
            elif MODE == "ask-flood":
                n = 0
                while True:
                    n += 1
                    send({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"})
            elif MODE == "ask":
                send({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"})
                send({"jsonrpc": "2.0", "id": "s2", "method": "ping"})
                got = {}
                for m in incoming:
                    if m.get("id") in ("s1", "s2") and "method" not in m:
                        got[m["id"]] = m
                    if len(got) == 2:
                        break
                roots = got["s1"].get("error", {}).get("message", "?")
                ping = "pong" if got["s2"].get("result") == {} else "no pong"
                text(msg, f"roots: {roots}; ping: {ping}")
            else:
                text(msg, f"a got {len(args.get('text', ''))} chars")
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "unknown method"}})


def http(port_file):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self):
            self.send_response(200)
            self.end_headers()

        def do_POST(self):
            msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if "id" not in msg:
                self.send_response(202)
                self.end_headers()
                return

            def answer(result):
                body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("mcp-session-id", "s1")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            method = msg.get("method")
            if method == "initialize":
                answer({"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile-http", "version": "0"}})
            elif method == "tools/list":
                answer({"tools": [dict(TOOLS[0], name=n) for n in "abc"]})
            elif method == "tools/call" and msg["params"]["name"] in "ab":
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                if msg["params"]["name"] == "a":
                    self.wfile.write(b"data: ")
                    while True:
                        self.wfile.write(b"x" * 65536)
                note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                   "params": {"level": "info", "data": "busy"}}).encode()
                while True:
                    self.wfile.write(b"data: " + note + b"\n\n")
            else:
                answer({"content": [{"type": "text", "text": "c answered"}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


try:
    if MODE == "http":
        http(sys.argv[2])
    else:
        main()
except (BrokenPipeError, ConnectionResetError):
    pass

"""A small MCP server written with the Python `mcp` SDK (v2), for loom's MCP tests: two tools over stdio."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("loom-py-peer")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def shout(text: str, times: int = 1) -> str:
    """Upper-case a text, repeated."""
    return " ".join([text.upper()] * times)


@server.tool()
def env_has(name: str) -> str:
    """Whether the server's environment has a variable (never its value)."""
    return "yes" if name in os.environ else "no"


if __name__ == "__main__":
    server.run("stdio")

"""A stdio MCP server written by hand that answers every tool call with a malformed result.

It speaks just enough JSON-RPC for a client to start a session and list its one tool.
"""

from __future__ import annotations

import json
import sys

TOOL = {"name": "broken", "description": "Answers nonsense.", "inputSchema": {"type": "object"}}


def reply(request_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            info = {"name": "malformed", "version": "0"}
            reply(
                message["id"],
                {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info},
            )
        elif method == "tools/list":
            reply(message["id"], {"tools": [TOOL]})
        elif method == "tools/call":
            reply(message["id"], {"content": "not a list of blocks"})
        elif "id" in message:
            reply(message["id"], {})


if __name__ == "__main__":
    main()

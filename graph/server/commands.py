"""What a run's `command` may carry through the server: `resume` and `update`, never `goto`.

The server turns a run's `command.goto` (a node name, or `{"node", "input"}` sends) into
`Command(goto=…)`, which would start a tool task with any arguments, past approval and the
guards. `FerryGraph` refuses such a command whoever sends it (graph/policy/provenance.py); here the
server refuses the run before creating it, so a client gets a 400 naming the rule instead of
a run that fails.
"""

from __future__ import annotations

from langgraph_sdk import Auth

from graph.policy.provenance import GOTO_REFUSED


def refuse_goto(server_auth: Auth) -> None:
    """Make `server_auth` refuse every run whose command carries `goto`.

    Args:
        server_auth: The server's authentication, which `langgraph.json` names.
    """

    @server_auth.on.threads.create_run
    async def runs_without_goto(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate) -> None:
        command = (value.get("kwargs") or {}).get("command")
        if isinstance(command, dict) and command.get("goto"):
            raise Auth.exceptions.HTTPException(status_code=400, detail=GOTO_REFUSED)

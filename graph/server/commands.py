"""What a run's `command` may carry through the server, refused before the run is made.

The server turns a run's `command` into a `Command`; `FerryGraph` admits it or refuses it
whoever sends it (graph/provenance.py). The shapes refused whatever the thread holds
(a `goto` anywhere but the end, `Send`s, several parts at once) are refused here too, before
the run is created, so a client gets a 400 naming the rule instead of a run that fails.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import Command
from langgraph_sdk import Auth

from graph.provenance import command_shape_error


def refuse_unsafe_commands(server_auth: Auth) -> None:
    """Make `server_auth` refuse every run whose command has a shape no client may send.

    Args:
        server_auth: The server's authentication, which `langgraph.json` names.
    """

    @server_auth.on.threads.create_run
    async def runs_with_safe_commands(
        ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate
    ) -> None:
        command = (value.get("kwargs") or {}).get("command")
        if not command:
            return
        problem = (
            command_shape_error(_as_command(command))
            if isinstance(command, dict)
            else "a run's command is an object with update, goto or resume"
        )
        if problem:
            raise Auth.exceptions.HTTPException(status_code=400, detail=problem)


def _as_command(command: dict[str, Any]) -> Command[Any]:
    """The `Command` the server would make of a run's `command` (as `map_cmd` does)."""
    goto = command.get("goto")
    gotos = goto if isinstance(goto, list) else [goto] if goto is not None else []
    return Command(
        update=command.get("update"),
        goto=[g if isinstance(g, str) else str(g) for g in gotos],  # a send is never the end
        resume=command.get("resume"),
    )

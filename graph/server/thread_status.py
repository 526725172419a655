"""The one call into the LangGraph server's internals: a thread's status from its stored state.

The server sets a thread's `status` (idle, busy, interrupted, error), `values` and `interrupts`
only when one of its own runs ends or a client updates the state; a thread the CLI paused for
approval stayed `idle`, so Studio's and Agent Inbox's "interrupted" filters missed it. No
public route recomputes the status without writing a checkpoint, so this module calls what
the server itself calls after `update_state` (`Threads.set_status`: interrupted when the state
has a next step, busy while one of its runs is pending, else idle), choosing the backend's
implementation as the server's thread routes do. tests/integration/test_agent_chat_ui.py
checks the contract through `langgraph dev`; tests/unit/test_server_thread_status.py its
signature.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph_sdk.schema import ThreadState


async def set_thread_status(thread_id: str, state: ThreadState) -> None:
    """Have the server show the thread as its state says: status, values and interrupts.

    Runs only inside the server (its lifespan), whose modules are loaded and configured then.

    Args:
        thread_id: The thread, a UUID the server knows.
        state: Its state, as the server's own `GET /threads/{id}/state` returns it.
    """
    threads = server_threads()
    from langgraph_runtime.database import connect  # type: ignore[import-untyped]  # see above

    # The state's `next` and `tasks` (with their interrupts) are what the status is computed from.
    checkpoint: dict[str, Any] = dict(state)
    async with connect() as conn:
        await threads.set_status(conn, uuid.UUID(thread_id), checkpoint, None)


def server_threads() -> Any:
    """The server's thread operations for its backend, the class its thread routes use."""
    # The server's modules have no type information.
    from langgraph_api.feature_flags import (  # type: ignore[import-untyped]
        IS_POSTGRES_OR_GRPC_BACKEND,
    )

    if IS_POSTGRES_OR_GRPC_BACKEND:
        from langgraph_api.grpc.ops import Threads  # type: ignore[import-untyped]
    else:
        from langgraph_runtime.ops import Threads  # type: ignore[import-untyped]
    return Threads

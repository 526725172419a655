"""What the loop and the CLI rely on of a Ferry saver, whatever its back end: `FerryStore`.

Ferry's SQLite saver (`FerrySaver`, the server's too) and its Postgres savers, sync and async,
implement it; a saver of the caller's own (LangGraph's, one in memory) does not, and runs
without what it gives: no lease per thread, no record of started calls, no thread summaries.
Callers ask `ferry_store(saver)`, never which class a saver is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import CheckpointTuple

    from graph.storage.history.folding import Fold
    from graph.storage.internals import DeltaChannelHistory
    from graph.storage.leases.sqlite import LeaseStore
    from graph.storage.threads.summaries import Row


@runtime_checkable
class FerryStore(Protocol):
    """A Ferry saver: started calls, leases, thread summaries, and the upkeep of what is stored."""

    serde: Any
    """Its serializer: a title stored sealed is opened with it."""
    fold: Fold | None
    """The `messages` reducer it folds histories with; None leaves them to LangGraph."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """LangGraph's read of a checkpoint (a thread without a current summary is rebuilt)."""
        ...

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's read of a channel's history up to `config`'s checkpoint."""
        ...

    def thread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's newest checkpoint with the summary stored of it, if any.

        One listing row per thread (`graph.storage.threads.summaries.LISTING`); what `ferry
        threads` shows is made of them (`graph.storage.threads.reading.list_threads`).
        """
        ...

    def store_summary(self, row: Row) -> None:
        """Store a thread's summary row; nothing if the database may not be written."""
        ...

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        ...

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        ...

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """The store of this database's leases on threads; None where none can be taken.

        A lease with no heartbeat for `timeout_s` has expired; `holder` names this run's.
        """
        ...

    def stored_bytes(self) -> int:
        """Disk space the stored threads take."""
        ...

    def compact(self) -> None:
        """Give the space freed by deleted threads and checkpoints back to the file system."""
        ...

    def prune_checkpoints(self, thread_ids: Sequence[str], *, keep: int) -> int:
        """Keep the newest `keep` checkpoints of each thread; return how many went.

        Raises:
            NotSupportedByDatabase: The back end cannot (the message says what to use instead).
        """
        ...

    def threads_updated_before(self, cutoff: datetime) -> list[str]:
        """Ids of the threads whose last checkpoint is older than `cutoff` (timezone-aware).

        What `ferry prune --before` deletes; read from the thread summaries.
        """
        ...


def ferry_store(saver: object) -> FerryStore | None:
    """`saver` as a Ferry saver; None for a saver of the caller's own."""
    return saver if isinstance(saver, FerryStore) else None


if TYPE_CHECKING:  # mypy checks that each of Ferry's savers is one, methods and signatures
    from graph.storage.postgres.saver import AsyncFerryPostgresSaver, FerryPostgresSaver
    from graph.storage.sqlite.saver import FerrySaver

    _SAVERS: tuple[type[FerryStore], ...] = (
        FerrySaver,
        FerryPostgresSaver,
        AsyncFerryPostgresSaver,
    )

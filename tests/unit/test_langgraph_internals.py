"""One contract test per LangGraph internal Ferry's storage relies on (graph/storage/internals.py).

A failure here after an upgrade names the assumption that broke; fix internals.py (and the
pins in pyproject.toml) before anything else.
"""

from __future__ import annotations

import importlib.util
import inspect
import operator
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.types import Send

from graph.storage import internals
from graph.storage.sqlite.layout import compact_version


def test_build_delta_channels_writes_history_keeps_its_signature_and_row_shape() -> None:
    params = set(inspect.signature(internals.build_delta_channels_writes_history).parameters)
    expected = {"channels", "chain_by_ch", "seed_val_by_ch", "seeded", "stage2_rows", "serde"}
    assert params == expected, (
        "langgraph-checkpoint-sqlite no longer provides build_delta_channels_writes_history("
        f"channels=..., chain_by_ch=..., seed_val_by_ch=..., seeded=..., stage2_rows=..., "
        f"serde=...): it takes {sorted(params)}"
    )
    serde = JsonPlusSerializer()
    row = ("c1", "messages", "task", 0, *serde.dumps_typed(["hi"]), "")
    history = internals.build_delta_channels_writes_history(
        channels=["messages"], chain_by_ch={"messages": ["c1"]}, seed_val_by_ch={"messages": ["a"]},
        seeded={"messages"}, stage2_rows=[row], serde=serde,
    )["messages"]  # fmt: skip
    assert history.get("seed") == ["a"] and [w[2] for w in history["writes"]] == [["hi"]], (
        "build_delta_channels_writes_history no longer turns stage-2 rows "
        "(checkpoint_id, channel, task_id, idx, type, value, task_path) into seed + writes: "
        f"{history}"
    )


def test_a_delta_snapshot_wraps_its_value_under_its_own_ext_code() -> None:
    snapshot = internals.DeltaSnapshot(["m"])
    assert snapshot.value == ["m"], "_DeltaSnapshot no longer holds its list in .value"
    type_tag, data = JsonPlusSerializer().dumps_typed(snapshot)
    seen: list[int] = []
    ormsgpack.unpackb(data, ext_hook=lambda code, _: seen.append(code))
    assert type_tag == "msgpack" and seen == [internals.EXT_DELTA_SNAPSHOT], (
        "LangGraph no longer stores a _DeltaSnapshot under EXT_DELTA_SNAPSHOT "
        f"({internals.EXT_DELTA_SNAPSHOT}): saw {type_tag} with ext codes {seen}"
    )


def test_langgraphs_msgpack_uses_the_ext_codes_ferry_loads() -> None:
    serde = JsonPlusSerializer()
    cases = {
        "a pydantic v2 model (a message)": (HumanMessage("x"), internals.EXT_PYDANTIC_V2),
        "a positional constructor (Send)": (Send("n", 1), internals.EXT_CONSTRUCTOR_POS_ARGS),
    }
    for what, (value, code) in cases.items():
        seen: list[int] = []
        ormsgpack.unpackb(serde.dumps_typed(value)[1], ext_hook=lambda c, _, s=seen: s.append(c))
        assert seen[:1] == [code], f"LangGraph's msgpack no longer stores {what} as ext {code}"


class _State(TypedDict):
    items: Annotated[list[Any], DeltaChannel(operator.add)]


def test_delta_channel_metadata_counts_updates_since_the_last_snapshot(tmp_path: Path) -> None:
    builder = StateGraph(_State)
    builder.add_node("step", lambda state: {"items": ["x"]})
    builder.add_edge("__start__", "step")
    saver = SqliteSaver(sqlite3.connect(tmp_path / "m.db", check_same_thread=False))
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"items": ["a"]}, {"configurable": {"thread_id": "t"}})
    metadata = [c.metadata for c in saver.list({"configurable": {"thread_id": "t"}})]
    counted = [m.get(internals.SNAPSHOT_COUNTERS, {}).get("items") for m in metadata]
    assert any(c is not None for c in counted), (
        "DeltaChannel metadata no longer counts updates in counters_since_delta_snapshot: "
        f"metadata was {metadata}"
    )
    # The second of the pair must be the supersteps (files of earlier releases hold it as 0).
    pairs = [c for c in counted if c is not None]
    assert all(len(c) == 2 and c[1] >= c[0] for c in pairs) and pairs[0][1] > pairs[-1][1], (
        "DeltaChannel counters are no longer (updates, supersteps since the last snapshot): "
        f"{counted}"
    )


def test_the_servers_versions_sort_after_ferrys() -> None:
    # langgraph_api cannot be imported outside a server (it reads its settings on import).
    spec = importlib.util.find_spec("langgraph_api")
    assert spec is not None and spec.submodule_search_locations
    source = (
        Path(spec.submodule_search_locations[0]) / "_checkpointer" / "_adapter.py"
    ).read_text()
    assumed = ['int(current.split(".")[0])', 'f"{next_v:032}.{next_h:.16f}"']
    assert all(text in source for text in assumed), (
        "the LangGraph server no longer numbers versions as 32 zero-padded digits and a "
        "fraction after int(current.split('.')[0]): Ferry's compact versions may not sort before"
    )
    ours = compact_version(41)
    theirs = f"{int(ours.split('.')[0]) + 1:032}.{0.5:.16f}"
    assert max(ours, theirs) == theirs > ours


def test_a_node_finds_its_runs_checkpointer_in_its_config() -> None:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver

    class State(TypedDict):
        n: int

    seen: list[Any] = []

    def node(state: State, config: RunnableConfig) -> dict[str, Any]:
        seen.append(internals.run_checkpointer(config))
        return {"n": state["n"] + 1}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.set_entry_point("node")
    saver = InMemorySaver()
    unsaved = builder.compile()  # as langgraph.json's graph: the server adds its saver per run
    unsaved.copy(update={"checkpointer": saver}).invoke(
        {"n": 0}, {"configurable": {"thread_id": "t"}}
    )
    assert seen == [saver], (
        "LangGraph no longer hands a node its run's checkpointer under "
        f"config['configurable'][{internals.CONFIG_KEY_CHECKPOINTER!r}]"
    )


def test_the_stock_sqlite_savers_next_version_is_32_digits_and_a_fraction() -> None:
    versions = [internals.stock_next_version(None)]
    versions.append(internals.stock_next_version(versions[-1]))
    versions.append(internals.stock_next_version(7))
    numbers = [int(v.split(".")[0]) for v in versions]
    assert numbers == [1, 2, 8] and all(len(v.split(".")[0]) == 32 for v in versions), (
        "SqliteSaver.get_next_version no longer numbers versions as 32 zero-padded digits "
        f"and a fraction, or no longer runs without its saver: {versions}"
    )


def test_the_postgres_savers_cursor_and_loop_are_where_ferry_reaches_them() -> None:
    pytest.importorskip("psycopg")
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    sync_params = list(inspect.signature(PostgresSaver._cursor).parameters)
    async_params = list(inspect.signature(AsyncPostgresSaver._cursor).parameters)
    assert sync_params == async_params == ["self", "pipeline"], (
        "PostgresSaver._cursor / AsyncPostgresSaver._cursor (private) changed: "
        f"{sync_params}, {async_params}; internals.postgres_cursor calls _cursor()"
    )
    init = inspect.getsource(AsyncPostgresSaver.__init__)
    assert "self.loop = asyncio.get_running_loop()" in init, (
        "AsyncPostgresSaver no longer keeps the loop it was made on as .loop (internals.saver_loop)"
    )


def test_langgraphs_select_sql_still_has_the_blob_join_ferry_rewrites() -> None:
    pytest.importorskip("psycopg")
    from langgraph.checkpoint.postgres.base import SELECT_SQL

    rewritten = internals.postgres_select_sql()
    assert rewritten != SELECT_SQL and "cross join lateral" in rewritten, (
        "LangGraph's Postgres SELECT_SQL no longer holds the channel_values join "
        "internals.postgres_select_sql replaces: each read scans the thread's blobs again"
    )


def test_langgraphs_postgres_savers_read_their_query_from_the_select_sql_attribute() -> None:
    pytest.importorskip("psycopg")
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    # Ferry's savers override the class attribute with internals.postgres_select_sql().
    for saver in (PostgresSaver, AsyncPostgresSaver):
        for method in ("get_tuple", "list") if saver is PostgresSaver else ("aget_tuple", "alist"):
            source = inspect.getsource(getattr(saver, method))
            assert "self.SELECT_SQL" in source, (
                f"{saver.__name__}.{method} no longer reads its query from self.SELECT_SQL: "
                "Ferry's Postgres savers would read with LangGraph's blob join again"
            )


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    pytest.importorskip("psycopg")
    from tests.support.pgserver import REQUIRED, PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        if REQUIRED:
            pytest.fail("no PostgreSQL server to test against")
        pytest.skip("no PostgreSQL server to test against")
    server = PostgresServer.start(bin_dir)
    try:
        yield server.create_database("internals")
    finally:
        server.stop()


def test_langgraphs_postgres_tables_have_the_columns_ferrys_sql_reads(postgres_url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.Connection.connect(postgres_url, autocommit=True) as conn:
        PostgresSaver(conn).setup()  # type: ignore[arg-type]  # tuple rows are enough for setup
        rows = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public'"
        ).fetchall()
    found: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        found.setdefault(table, {})[column] = data_type
    missing = {
        table: [c for c in columns if c not in found.get(table, {})]
        for table, columns in internals.LANGGRAPH_POSTGRES_COLUMNS.items()
    }
    assert not any(missing.values()), (
        f"LangGraph's Postgres tables lost columns Ferry's own SQL reads: {missing}"
    )
    assert found["checkpoints"]["checkpoint"] == "jsonb", (
        "checkpoints.checkpoint is no longer JSONB: Ferry reads channel_versions from it"
    )


def test_langgraph_snapshots_a_delta_channel_at_the_superstep_bound_ferry_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound Ferry reads is the one LangGraph decides by, counted as its counters count."""
    assert internals.superstep_snapshot_bound() == 5000  # LangGraph's default (no env set)
    monkeypatch.setattr("langgraph.pregel._checkpoint.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", 3)
    assert internals.superstep_snapshot_bound() == 3
    builder = StateGraph(_State)
    builder.add_node("step", lambda state: {"items": ["x"]})
    builder.add_edge("__start__", "step")
    saver = SqliteSaver(sqlite3.connect(tmp_path / "b.db", check_same_thread=False))
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for _ in range(3):
        graph.invoke({"items": ["a"]}, config)
    steps = list(reversed(list(saver.list(config))))  # oldest first
    snapshots = [
        i for i, c in enumerate(steps)
        if isinstance(c.checkpoint["channel_values"].get("items"), internals.DeltaSnapshot)
    ]  # fmt: skip
    assert snapshots, "no DeltaSnapshot taken at the lowered superstep bound"
    before = steps[snapshots[0] - 1].metadata[internals.SNAPSHOT_COUNTERS]["items"]
    assert before[1] + 1 >= internals.superstep_snapshot_bound(), (
        f"the snapshot came at supersteps {before[1]} + 1, not at the bound Ferry reads"
    )

"""Ferry's settings: read from the environment, then from `.env` without overriding it."""

from __future__ import annotations

import ast
import inspect
import os
from dataclasses import fields
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from graph.core.hitl import ALL_DECISIONS, DEFAULT_DECISIONS, DecisionType
from tools.settings import ToolSettings, default_user, is_system_root
from tools.trust import load_dotenv


class ConfigError(Exception):
    """A setting that cannot work; its message is one line meant for the user."""


class ModelPrice(BaseModel):
    """What a model costs, in US dollars per million tokens (`FERRY_PRICES`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a cost is a number

    input_mtok: float = Field(ge=0)
    output_mtok: float = Field(ge=0)
    cache_read_mtok: float | None = Field(default=None, ge=0)
    """Input read from the provider's prompt cache (default: as other input)."""
    cache_write_mtok: float | None = Field(default=None, ge=0)
    """Input written to the provider's prompt cache (default: as other input)."""


def load_dotenv_file(path: Path | None = None) -> None:
    """Load `.env` into the process environment, never overriding what the shell set.

    Only a `.env` the user trusted (`ferry trust`) is loaded; another is named on stderr, once.
    Secrets (API keys) stay in the environment only; the typed settings below never hold them.
    """
    load_dotenv(path)


def _default_model() -> str:
    """`openai:gpt-4.1-mini` with `OPENAI_API_KEY`, else `offline`."""
    return "openai:gpt-4.1-mini" if os.environ.get("OPENAI_API_KEY") else "offline"


class Settings(BaseSettings):
    """Per-run settings. Every field is an environment variable prefixed with `FERRY_`."""

    # Each field's docstring is its description (`_with_attribute_docstrings`, below): the docs'
    # settings reference is made from it.
    model_config = SettingsConfigDict(env_prefix="FERRY_", frozen=True, extra="ignore")

    model: str = Field(default_factory=_default_model)
    """Model spec: `offline`, `openai:<model>`, `anthropic:<model>` or `ollama:<model>`; several,
    comma-separated, fall back from each to the next when one is unavailable (connection error,
    timeout, 429, 5xx), the one that failed passed over for a minute."""
    db: Path = Path(".ferry/ferry.db")
    """SQLite checkpoint file."""
    database_url: str | None = None
    """`postgresql://…` to use the Postgres checkpointer instead of SQLite."""
    # validate_default: the working directory, the default, may itself be `/`.
    files_root: Path = Field(default_factory=Path.cwd, validate_default=True)
    """The only folder `read_file` may read; never `/` or a system folder."""
    files_allow_hardlinks: bool = ToolSettings.files_allow_hardlinks
    """Let `read_file` read files with several hard links (one may be a name for a secret)."""
    user: str = Field(default_factory=default_user, min_length=1)
    """Whose memories `remember` and `recall` keep and `ferry memory` shows (the server's
    authenticated user instead, under `langgraph dev`)."""
    max_iterations: int = Field(default=10, ge=1)
    """Model calls per turn before a graceful stop."""
    token_budget: int = Field(default=0, ge=0)
    """Total tokens per turn before a graceful stop; 0 means no budget."""
    cost_budget: float = Field(default=0.0, ge=0)
    """US dollars per turn before a graceful stop; 0 means no budget. A reply whose model has
    no known price counts nothing (and is logged): give it one in `FERRY_PRICES`."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Prices of models genai-prices' table lacks (or that you pay otherwise), by model name or
    spec, as JSON: `{"my-model": {"input_mtok": 0.5, "output_mtok": 1.5}}` (US dollars per
    million tokens; `cache_read_mtok` and `cache_write_mtok` too)."""
    time_budget_s: float = Field(default=300.0, gt=0)
    """Wall-clock seconds per invocation (`ask` or `resume`) before a graceful stop."""
    output_retries: int = Field(default=2, ge=0)
    """Answers that do not match a run's answer schema sent back to the model to correct,
    before the turn ends with `stop_reason` `invalid_output`."""
    tool_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds one tool call may run before it is answered with a timeout error."""
    max_parallel_tools: int = Field(default=4, ge=1)
    """Tool calls running at once."""
    context_tokens: int = Field(default=100_000, ge=1_000)
    """Approximate tokens sent to the model; the oldest whole turns are left out beyond it."""
    compaction: Literal["summary", "drop"] = "summary"
    """What the model is told of the turns left out: a summary of them, extended at each
    compaction and stored in the thread (`summary`), or only that they were left out (`drop`)."""
    summary_model: str = ""
    """Model spec that writes the summaries (default: the thread's own model)."""
    breaker_threshold: int = Field(default=3, ge=1)
    """Consecutive failures that disable a tool for the rest of a thread."""
    lease_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds without a heartbeat before another run takes over a run's lease on its thread."""
    approve_tools: str = ""
    """Comma-separated tools that need a person's approval, each optionally with the decisions
    allowed: `read_file,web_search:approve|reject` (default: approve, edit, reject; `respond` only
    when listed, e.g. `calculator:approve|edit|reject|respond`)."""
    exfiltration_guard: Literal["ask", "deny", "allow", "off"] = "ask"
    """Outbound calls once the model's context holds private data: a person decides each
    (`ask`), they are refused (`deny`), only those quoting it are held (`allow`), or none is
    (`off`). `approve` and `refuse`, the earlier names, mean `ask` and `deny`."""
    tavily_url: str = ToolSettings.tavily_url
    """Tavily API base URL."""
    search_max_chars: int = Field(default=ToolSettings.search_max_chars, ge=200)
    """Cap on the size of one web_search reply."""
    geocoding_url: str = ToolSettings.geocoding_url
    """Open-Meteo geocoding API base (`/search` is appended)."""
    forecast_url: str = ToolSettings.forecast_url
    """Open-Meteo forecast API base (`/forecast` is appended)."""
    http_timeout_s: float = Field(default=ToolSettings.http_timeout_s, gt=0)
    """Timeout of one HTTP request made by a tool."""
    http_retry_total_s: float = Field(default=ToolSettings.http_retry_total_s, ge=0)
    """Total time a tool may spend retrying transient HTTP failures."""
    tools: str = ""
    """Your own tools, comma-separated `module:ATTR` (`tickets:tools`): each a list of LangChain
    tools or one tool, the module imported from the Python path or the working directory; offered
    beside the built-in ones, whose names they may not take."""
    mcp_config: Path | None = None
    """JSON file of MCP servers (`mcpServers`); by default a trusted `mcp.json` in the working
    directory."""
    tool_images: str = Field(default="auto", pattern="^(auto|on|off)$")
    """Images in tool results: `auto` shows them to models whose LangChain profile takes images,
    `on` to every model, `off` to none (a note names each image instead)."""
    log_format: str = Field(default="text", pattern="^(text|json)$")
    """`text` or `json` log lines."""
    log_file: Path | None = None
    """Where logs go; stderr when unset."""
    max_stored_value_mb: int = Field(default=32, ge=1)
    """What one stored value may decompress to when read: a bound on a read's memory."""
    temporal_address: str | None = None
    """Temporal frontend (`host:port`): `ferry worker` serves it; ask, chat, resume use it."""
    temporal_namespace: str = "default"
    """Temporal namespace of Ferry's workflows."""
    temporal_task_queue: str = "ferry"
    """Temporal task queue Ferry's workers poll."""
    temporal_wait_s: float = Field(default=300.0, gt=0)
    """How long a client watching a Temporal turn waits for a server that is away (its turn
    goes on) before it gives up, naming `ferry resume --thread ID`."""
    temporal_retry_s: float = Field(default=10.0, gt=0)
    """How long a call to Temporal is retried while the server does not answer before the server
    counts as away (the SDK's own retries): a client watching a turn then says so at once and
    waits `FERRY_TEMPORAL_WAIT_S`; other commands end in one line. A worker started before
    its server waits for it, and its polls for work retry until the server is back, whatever
    this is."""
    temporal_heartbeat_s: float = Field(default=10.0, ge=1, le=3600)
    """How long a Temporal worker may go silent before its turns go on on another worker, 1 to
    3600 s: a step's heartbeat timeout (steps beat every 2 s, or a fifth of this if shorter),
    sent with each turn `ask`, `chat` and `resume` start; and, `ferry worker`'s own, how long a
    turn's next decision waits for the worker that made its last."""

    @field_validator("files_root")
    @classmethod
    def _not_a_system_folder(cls, files_root: Path) -> Path:
        if is_system_root(files_root):
            raise PydanticCustomError(
                "system_root",
                "must be a project folder, not / or a system folder whose secrets read_file "
                "would serve; it defaults to the working directory",
            )
        return files_root

    @field_validator("exfiltration_guard", mode="before")
    @classmethod
    def _earlier_names(cls, mode: object) -> object:
        earlier = {"approve": "ask", "refuse": "deny"}
        return earlier.get(mode, mode) if isinstance(mode, str) else mode

    @field_validator("mcp_config", mode="before")
    @classmethod
    def _unset_when_empty(cls, mcp_config: object) -> object:
        return None if mcp_config == "" else mcp_config  # `FERRY_MCP_CONFIG=`: the default

    def tool_settings(self) -> ToolSettings:
        """Return the part of these settings the tools read; each tool call is handed it."""
        return ToolSettings(**{f.name: getattr(self, f.name) for f in fields(ToolSettings)})

    @field_validator("approve_tools")
    @classmethod
    def _known_decisions(cls, approve_tools: str) -> str:
        try:
            approval_decisions(approve_tools)
        except ValueError as exc:
            raise PydanticCustomError("approval_decisions", str(exc)) from exc
        return approve_tools

    @property
    def approval_required(self) -> frozenset[str]:
        """Tool names listed in `FERRY_APPROVE_TOOLS`."""
        return frozenset(self.approval_decisions)

    @property
    def approval_decisions(self) -> dict[str, tuple[DecisionType, ...]]:
        """Each tool listed in `FERRY_APPROVE_TOOLS` → the decisions a person may make."""
        return approval_decisions(self.approve_tools)


def _with_attribute_docstrings(cls: type[Settings]) -> None:
    """Give each field of `cls` the docstring below it as its description.

    What pydantic's `use_attribute_docstrings` does, but from the class's own source: on Python
    < 3.13 pydantic finds that source through `inspect.getmodule` on the caller's frames, which
    maps the file of every module loaded so far, about 0.1 s of CPU in `ferry ask`.
    """
    try:
        source = Path(__file__).read_text(encoding="utf-8")
    except OSError:  # installed without its source: no descriptions, as pydantic would give
        return
    module = ast.parse(source)
    body = next(
        c for c in module.body if isinstance(c, ast.ClassDef) and c.name == cls.__name__
    ).body
    for field, after in zip(body, body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            cls.model_fields[field.target.id].description = inspect.cleandoc(after.value.value)
    cls.model_rebuild(force=True)  # the JSON schema carries the descriptions too


_with_attribute_docstrings(Settings)


def approval_decisions(approve_tools: str) -> dict[str, tuple[DecisionType, ...]]:
    """Parse `FERRY_APPROVE_TOOLS`: `tool[:decision|decision…]`, comma-separated.

    A bare `tool` allows approve, edit and reject; `respond` only when the entry names it.
    """
    parsed: dict[str, tuple[DecisionType, ...]] = {}
    for entry in filter(None, (e.strip() for e in approve_tools.split(","))):
        name, _, listed = (part.strip() for part in entry.partition(":"))
        chosen = [d.strip() for d in listed.split("|") if d.strip()]
        unknown = [d for d in chosen if d not in ALL_DECISIONS]
        if unknown or not name or (listed and not chosen):
            raise ValueError(
                f"{entry!r}: write tool or tool:decision|decision, decisions among "
                f"{'|'.join(ALL_DECISIONS)}"
            )
        parsed[name] = tuple(cast(list[DecisionType], chosen)) or DEFAULT_DECISIONS
    return parsed


def get_settings() -> Settings:
    """Read the settings now (tests change the environment between calls)."""
    load_dotenv_file()
    try:
        return Settings()
    except ValidationError as exc:
        error = exc.errors()[0]
        variable, *within = (str(part) for part in error["loc"])
        where = f" at {'.'.join(within)}" if within else ""  # inside a JSON setting's value
        raise ConfigError(
            f"FERRY_{variable.upper()}{where}: {error['msg']} (got {error.get('input')!r})"
        ) from exc
    except SettingsError as exc:  # a JSON setting that does not parse
        field = str(exc).partition('field "')[2].partition('"')[0]
        raise ConfigError(f"FERRY_{field.upper()}: not valid JSON ({exc.__cause__})") from exc

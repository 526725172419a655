"""What the tools need to know, handed over by the run or, standalone, read from the environment.

And their secrets: API keys, read from the environment when used (`secret`), never held in the
settings; and the MCP servers file's `env` and `headers` values, remembered when the file is
read (`remember_secrets`) so that Ferry's log redaction leaves them out (`config_secrets`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tools.trust import load_dotenv

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

CONFIG_KEY = "ferry_tool_settings"
"""`configurable` key of the run's config under which the tools find their settings."""

SYSTEM_ROOTS = (
    *("/", "/etc", "/proc", "/sys", "/dev", "/usr", "/boot", "/root"),
    *("/bin", "/sbin", "/lib", "/lib64", "/var", "/run"),
)
"""Folders `read_file` must never serve as its root: they hold the system's secrets."""

_TRUE, _FALSE = ("1", "true", "t", "yes", "y", "on"), ("0", "false", "f", "no", "n", "off", "")


def is_system_root(path: Path) -> bool:
    """Tell whether `path` is `/` or a system folder, or resolves to one."""
    resolved = path.resolve()
    return any(resolved in (Path(root), Path(root).resolve()) for root in SYSTEM_ROOTS)


@dataclass(frozen=True)
class ToolSettings:
    """The tools' settings; each field is the `FERRY_` variable of the same name."""

    files_root: Path = field(default_factory=Path.cwd)
    """The only folder `read_file` may read."""
    files_allow_hardlinks: bool = False
    """Let `read_file` read files with several hard links (one may be a name for a secret)."""
    tavily_url: str = "https://api.tavily.com"
    """Tavily API base URL."""
    search_max_chars: int = 4_000
    """Cap on the size of one web_search reply."""
    geocoding_url: str = "https://geocoding-api.open-meteo.com/v1"
    """Open-Meteo geocoding API base (`/search` is appended)."""
    forecast_url: str = "https://api.open-meteo.com/v1"
    """Open-Meteo forecast API base (`/forecast` is appended)."""
    http_timeout_s: float = 10.0
    """Timeout of one HTTP request made by a tool."""
    http_retry_total_s: float = 20.0
    """Total time a tool may spend retrying transient HTTP failures."""
    tool_timeout_s: float = 30.0
    """Seconds one tool call may run (tools that wait on another process stop waiting then)."""
    user: str = field(default_factory=lambda: default_user())
    """Whose memories `remember` and `recall` keep (tools/memory.py)."""

    @classmethod
    def from_environment(cls) -> ToolSettings:
        """Read the `FERRY_` variables (then a trusted `.env`, not overriding them), as Ferry does.

        Raises:
            ToolException: naming the variable whose value cannot be used.
        """
        load_dotenv()
        settings = cls()
        return replace(
            settings,
            files_root=Path(_variable("FILES_ROOT", str(settings.files_root))),
            files_allow_hardlinks=_flag("FILES_ALLOW_HARDLINKS"),
            tavily_url=_variable("TAVILY_URL", settings.tavily_url),
            search_max_chars=int(_number("SEARCH_MAX_CHARS", settings.search_max_chars)),
            geocoding_url=_variable("GEOCODING_URL", settings.geocoding_url),
            forecast_url=_variable("FORECAST_URL", settings.forecast_url),
            http_timeout_s=_number("HTTP_TIMEOUT_S", settings.http_timeout_s),
            http_retry_total_s=_number("HTTP_RETRY_TOTAL_S", settings.http_retry_total_s),
            tool_timeout_s=_number("TOOL_TIMEOUT_S", settings.tool_timeout_s),
            user=_variable("USER", settings.user).strip() or settings.user,
        )


def default_user() -> str:
    """`FERRY_USER`'s default: the login name, or "default" where there is none."""
    import getpass

    try:
        return getpass.getuser() or "default"
    except (OSError, KeyError):  # no login name (a container's uid without a passwd entry)
        return "default"


def secret(name: str) -> str:
    """Return the secret `name` from the environment or a trusted `.env`; settings hold none."""
    load_dotenv()
    return os.environ.get(name, "").strip()


def tool_settings(config: RunnableConfig | None) -> ToolSettings:
    """Return the settings the run handed over in `config`, else those of the environment."""
    handed = (config or {}).get("configurable", {}).get(CONFIG_KEY)
    return handed if isinstance(handed, ToolSettings) else ToolSettings.from_environment()


def with_tool_settings(config: RunnableConfig, settings: ToolSettings) -> RunnableConfig:
    """Return a copy of `config` that hands `settings` to the tools it is invoked with."""
    return {**config, "configurable": {**config.get("configurable", {}), CONFIG_KEY: settings}}


def _variable(name: str, default: str) -> str:
    return os.environ.get(f"FERRY_{name}", default)


def _flag(name: str) -> bool:
    value = _variable(name, "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise _refused(f"FERRY_{name}: expected 1 or 0 (got {value!r}).")
    return value in _TRUE


def _number(name: str, default: float) -> float:
    value = _variable(name, str(default))
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0:  # also refuses NaN
        raise _refused(f"FERRY_{name}: expected a number of 0 or more (got {value!r}).")
    return number


def _refused(message: str) -> Exception:
    """A `ToolException`: what a tool reading its settings standalone fails with."""
    from langchain_core.tools import ToolException  # here: every `ferry` command imports us

    return ToolException(message)


_secrets_lock = threading.Lock()
_secret_values: set[str] = set()


def remember_secrets(values: set[str]) -> None:
    """Add values that must never be written to a log, a tool result or a checkpoint."""
    with _secrets_lock:
        _secret_values.update(v for v in values if v.strip())


def config_secrets() -> tuple[tuple[str, str], ...]:
    """Each remembered secret as a `(name, value)` pair named like a secret, sorted: a cache key."""
    with _secrets_lock:
        return tuple(("MCP_CONFIG_SECRET", value) for value in sorted(_secret_values))

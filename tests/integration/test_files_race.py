"""read_file under attack: another process swaps a folder and a symlink to the outside non-stop.

Before the walk by descriptors, about one read in thirty leaked the outside file this way.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.tools import ToolException

from tools.files import read_file

SECRET = "SECRET-0d2e"
SWAP_SECONDS = 3.0
# Far below what a slow, busy 2-core machine does in SWAP_SECONDS (about 1,000 here), yet "many".
MIN_ATTEMPTS = 100
MIN_SWAPS = 100

# Swaps `swap` (a folder) with `decoy` (a symlink to the outside) atomically, as fast as it can,
# with renameat2(RENAME_EXCHANGE); where that is missing, renames the folder away and puts a
# symlink in its place, then back.
SWAPPER = r"""
import ctypes, os, sys, time

swap, decoy, outside, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = getattr(libc, "renameat2", None)
os.symlink(outside, decoy)

def exchange():
    return renameat2(-100, swap.encode(), -100, decoy.encode(), 2) == 0  # AT_FDCWD, EXCHANGE

def step_aside():
    os.rename(swap, swap + ".parked")
    os.symlink(outside, swap)
    os.unlink(swap)
    os.rename(swap + ".parked", swap)

swap_once = exchange if renameat2 is not None and exchange() and exchange() else step_aside
print("ready", flush=True)
swaps, deadline = 0, time.monotonic() + seconds
while time.monotonic() < deadline:
    swap_once()
    swaps += 1
print(swaps, flush=True)
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root whose `swap` folder has a twin outside, holding the secret under the same names."""
    root = tmp_path / "root"
    (root / "swap").mkdir(parents=True)
    (root / "swap" / "public.txt").write_text("public\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "public.txt").write_text(f"{SECRET}\n")
    (outside / f"{SECRET}.txt").write_text("listed only outside\n")
    monkeypatch.setenv("FERRY_FILES_ROOT", str(root))
    return root


def _read(path: str) -> tuple[str, bool]:
    try:
        return read_file.invoke({"path": path}), True
    except ToolException as error:
        return str(error), False


def _read_while_running(swapper: subprocess.Popen[str]) -> tuple[int, int, list[str]]:
    """Read a file and list a folder through `swap` until the swapper stops."""
    attempts, answered, leaks = 0, 0, []
    give_up = time.monotonic() + SWAP_SECONDS + 30
    while swapper.poll() is None and time.monotonic() < give_up:
        for path in ("swap/public.txt", "swap"):
            reply, ok = _read(path)
            attempts, answered = attempts + 1, answered + ok
            if SECRET in reply:
                leaks.append(reply)
    return attempts, answered, leaks


def test_no_read_or_listing_leaks_while_a_folder_is_swapped_for_a_symlink(root: Path) -> None:
    argv = [sys.executable, "-c", SWAPPER, str(root / "swap"), str(root / "decoy")]
    outside = str(root.parent / "outside")
    with subprocess.Popen(
        [*argv, outside, str(SWAP_SECONDS)], stdout=subprocess.PIPE, text=True
    ) as swapper:
        assert swapper.stdout is not None
        try:
            assert swapper.stdout.readline() == "ready\n"
            attempts, answered, leaks = _read_while_running(swapper)
            swaps = int(swapper.stdout.read())
        finally:
            swapper.kill()  # the with block then waits for it and closes its pipe
    print(f"{attempts} reads and listings ({answered} answered), {swaps} swaps, {len(leaks)} leaks")
    assert leaks == []
    assert attempts >= MIN_ATTEMPTS
    assert swaps >= MIN_SWAPS

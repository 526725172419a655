"""Counts per saver, and the failures on Ferry's savers that LangGraph's own savers do not have.

    python bench/langgraph_suite/summarize.py WORK_DIR

reads WORK_DIR/report.jsonl (written by ferry_fixtures.py) and WORK_DIR/meta.txt, and prints
Markdown. A test that fails on a Ferry saver is "Ferry-only" when the same test, with the same
other parameters, passes on the stock saver it is compared with (BASELINE below). "calls (s)"
adds up the tests' call phases on that saver (under `-n 2`, on a shared machine: rough).
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

BASELINE = {
    "ferry": "sqlite",
    "ferry_aio": "sqlite_aio",
    "ferry_server": "sqlite_aio",
    "ferry_pg": "postgres",
    "ferry_server_pg": "postgres_aio",
}
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def outcomes(lines: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    """Each test's one outcome (an error in setup or teardown outranks the call's result)."""
    tests: dict[str, dict[str, object]] = {}
    for line in lines:
        test = tests.setdefault(
            str(line["nodeid"]),
            {
                "saver": line["saver"],
                "side": line["side"],
                "key": line["key"],
                "phases": {},
                "crash": None,
                "seconds": 0.0,
            },
        )
        phases = test["phases"]
        assert isinstance(phases, dict)
        phases[line["when"]] = (line["outcome"], line.get("xfail"))
        if line["when"] == "call":
            test["seconds"] = float(line.get("duration") or 0.0)
        if line["outcome"] == "failed" and test["crash"] is None:
            test["crash"] = line.get("crash")
        if line["outcome"] == "skipped":
            test["crash"] = line.get("crash")
    for test in tests.values():
        phases = test["phases"]
        assert isinstance(phases, dict)
        if any(phases.get(w, ("",))[0] == "failed" for w in ("setup", "teardown")):
            result = "error"
        elif "call" in phases:
            outcome, xfail = phases["call"]
            if xfail:
                result = "xfailed" if outcome == "skipped" else "xpassed"
            else:
                result = outcome
        elif phases.get("setup", ("",))[0] == "skipped":
            result = "skipped"
        else:
            result = "error"
        test["result"] = result
    return tests


def main(work: Path) -> None:
    lines = [json.loads(s) for s in (work / "report.jsonl").read_text().splitlines() if s]
    tests = outcomes(lines)
    meta = (work / "meta.txt").read_text() if (work / "meta.txt").exists() else ""
    print("```\n" + meta.strip() + "\n```\n")

    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    seconds: Counter[tuple[str, str]] = Counter()
    by_key: dict[tuple[str, str], str] = {}
    for test in tests.values():
        saver, side = str(test["saver"]), str(test["side"])
        counts[(saver, side)][str(test["result"])] += 1
        seconds[(saver, side)] += float(test["seconds"])  # type: ignore[arg-type]
        by_key[(saver, str(test["key"]))] = str(test["result"])

    print("| saver | fixture | tests | " + " | ".join(OUTCOMES) + " | calls (s) |")
    print("|---|---|---|" + "---|" * len(OUTCOMES) + "---|")
    for saver, side in sorted(counts, key=lambda s: (s[1] != "sync", s[0] in BASELINE, s[0])):
        c = counts[(saver, side)]
        cells = " | ".join(str(c[o]) for o in OUTCOMES)
        took = seconds[(saver, side)]
        print(f"| {saver} | {side}_checkpointer | {sum(c.values())} | {cells} | {took:.0f} |")
    print()

    for saver, baseline in BASELINE.items():
        if not any(s == saver for s, _ in counts):
            continue
        bad = [
            t
            for t in tests.values()
            if t["saver"] == saver and t["result"] in ("failed", "error", "xpassed")
        ]
        only = [t for t in bad if by_key.get((baseline, str(t["key"]))) == "passed"]
        also = [t for t in bad if t not in only]
        print(f"### {saver} (compared with {baseline})\n")
        print(
            f"{len(bad)} failed or errored; {len(only)} pass on {baseline} (Ferry-only), "
            f"{len(also)} fail there too or were not run there.\n"
        )
        grouped: dict[str, list[dict[str, object]]] = defaultdict(list)
        for t in only:
            grouped[str(t["key"]).split("[")[0]].append(t)
        for name in sorted(grouped):
            group = grouped[name]
            crashes = Counter(str(t["crash"] or t["result"]).splitlines()[0][:300] for t in group)
            print(f"- `{name}` ({len(group)} parametrization(s))")
            for crash, n in crashes.most_common():
                print(f"  - {n}x {crash}")
        if also:
            print("\nFailing on the baseline too (not Ferry's):")
            for t in sorted(also, key=lambda t: str(t["key"])):
                base = by_key.get((baseline, str(t["key"])), "not run")
                print(f"- `{t['key']}` ({baseline}: {base})")
        print()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

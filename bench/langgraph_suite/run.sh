#!/usr/bin/env bash
# Run LangGraph's own checkpointer tests (Pregel, time travel, subgraphs, interrupts, delta
# channels...) at the installed LangGraph version on Ferry's savers and on LangGraph's own.
# Not part of `make test`. See README.md in this folder.
#
#   bench/langgraph_suite/run.sh [--mirror GIT_DIR] [--source auto|mirror|mirror-nearest|sdist]
#                                [--work DIR] [--sync LIST] [--async LIST] [-n N]
#                                [--files "tests/test_a.py ..."] [--ferry-ref REF]
#                                [-- PYTEST_ARGS...]
#
# --ferry-ref REF runs Ferry's `graph` package as committed at REF (`git archive`, into the work
# folder, first on PYTHONPATH) instead of the working tree, which other work may be changing.
# Environment equivalents: LG_MIRROR, LG_SOURCE, LG_WORK, FERRY_LG_SYNC, FERRY_LG_ASYNC,
# LG_WORKERS, LG_FILES, FERRY_REF. Writes report.jsonl, pytest.log and summary.md in the work folder.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FERRY="$(cd "$HERE/../.." && pwd)"
PY="${FERRY_PYTHON:-$FERRY/.venv/bin/python}"

MIRROR="${LG_MIRROR:-}"
SOURCE="${LG_SOURCE:-auto}"
WORK="${LG_WORK:-}"
SYNC="${FERRY_LG_SYNC:-memory,sqlite,ferry,ferry_pg,postgres}"
ASYNC="${FERRY_LG_ASYNC:-memory,sqlite_aio,ferry_aio,ferry_server,ferry_server_pg,postgres_aio}"
WORKERS="${LG_WORKERS:-2}"
FILES="${LG_FILES:-}"
FERRY_REF="${FERRY_REF:-}"
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mirror) MIRROR="$2"; shift 2 ;;
    --source) SOURCE="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --sync) SYNC="$2"; shift 2 ;;
    --async) ASYNC="$2"; shift 2 ;;
    -n) WORKERS="$2"; shift 2 ;;
    --files) FILES="$2"; shift 2 ;;
    --ferry-ref) FERRY_REF="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -n "$WORK" ] || WORK="$(mktemp -d /tmp/ferry-lg-suite.XXXXXX)"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
rm -rf "$WORK/lg" "$WORK/deps" "$WORK/ferry" "$WORK/report.jsonl"
mkdir -p "$WORK/lg"

VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("langgraph"))')"
echo "installed langgraph $VERSION; work folder $WORK"

# --- the tests, at the installed version --------------------------------------------------------
from_git() {  # $1: a commit or tag in $MIRROR
  git --git-dir="$MIRROR" archive "$1" libs/langgraph/tests libs/langgraph/pyproject.toml \
    libs/langgraph/uv.lock | tar -x -C "$WORK/lg" --strip-components=2
}
mirror_commit_of() {  # the newest commit whose libs/langgraph/pyproject.toml says $1
  local h
  for h in $(git --git-dir="$MIRROR" log --all --format=%H -- libs/langgraph/pyproject.toml); do
    if git --git-dir="$MIRROR" show "$h:libs/langgraph/pyproject.toml" 2>/dev/null \
      | grep -qx "version = \"$1\""; then
      echo "$h"; return 0
    fi
  done
  return 1
}
from_sdist() {
  mkdir -p "$WORK/sdist"
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$WORK/sdist" "langgraph==$VERSION"
  local tarball="$WORK/sdist/langgraph-$VERSION.tar.gz"
  tar -x -z -f "$tarball" -C "$WORK/lg" --strip-components=1 \
    "langgraph-$VERSION/tests" "langgraph-$VERSION/pyproject.toml" "langgraph-$VERSION/uv.lock"
  echo "PyPI sdist langgraph-$VERSION.tar.gz sha256 $(sha256sum "$tarball" | cut -d' ' -f1)"
}

DESCRIBED=""
if [ "$SOURCE" != sdist ] && [ -n "$MIRROR" ]; then
  if git --git-dir="$MIRROR" rev-parse -q --verify "refs/tags/$VERSION" >/dev/null; then
    from_git "refs/tags/$VERSION"
    DESCRIBED="mirror $MIRROR tag $VERSION ($(git --git-dir="$MIRROR" rev-parse "$VERSION^{commit}"))"
  elif commit="$(mirror_commit_of "$VERSION")"; then
    from_git "$commit"
    DESCRIBED="mirror $MIRROR commit $commit (pyproject version $VERSION; no tag)"
  elif [ "$SOURCE" = mirror-nearest ]; then
    nearest="$( (git --git-dir="$MIRROR" tag | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$'
      echo "$VERSION") | sort -V -u | grep -B1 -x "$VERSION" | head -1)"
    from_git "refs/tags/$nearest"
    DESCRIBED="mirror $MIRROR tag $nearest: NOT the installed $VERSION (the mirror has no newer)"
  elif [ "$SOURCE" = mirror ]; then
    echo "the mirror has neither tag $VERSION nor a commit at that version" >&2; exit 1
  else
    echo "the mirror has no tag or commit at langgraph $VERSION: using PyPI's sdist instead"
  fi
elif [ "$SOURCE" = mirror ] || [ "$SOURCE" = mirror-nearest ]; then
  echo "--source $SOURCE needs --mirror GIT_DIR (or LG_MIRROR)" >&2; exit 2
fi
[ -n "$DESCRIBED" ] || DESCRIBED="$(from_sdist)"
echo "tests from: $DESCRIBED"
echo "$DESCRIBED" >"$WORK/source.txt"

# --- test-only dependencies, into the work folder only (never Ferry's venv) -------------------
locked() {  # the version of $1 in LangGraph's uv.lock
  awk -v n="$1" '$0 == "name = \"" n "\"" { getline; gsub(/version = |"/, ""); print; exit }' \
    "$WORK/lg/uv.lock"
}
DEPS=()
for dep in redis pytest-mock pytest-repeat syrupy; do
  v="$(locked "$dep" || true)"
  DEPS+=("$dep${v:+==$v}")
done
echo "test deps (into $WORK/deps): ${DEPS[*]}"
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$WORK/deps" \
  "${DEPS[@]}"

# --- Ferry's savers as options of LangGraph's fixtures -----------------------------------------
# A copy, so that editing this folder during a run changes nothing in it.
mkdir -p "$WORK/plugin"
cp "$HERE/ferry_fixtures.py" "$WORK/plugin/"
cat >>"$WORK/lg/tests/conftest.py" <<'PY'


# Added by Ferry's bench/langgraph_suite/run.sh: Ferry's savers as options of these two fixtures.
import ferry_fixtures as _ferry  # noqa: E402
from ferry_fixtures import (  # noqa: E402,F401
    pytest_collection_modifyitems,
    pytest_runtest_logreport,
    pytest_unconfigure,
)

sync_checkpointer = pytest.fixture(scope="function", params=_ferry.SYNC)(
    _ferry.sync_checkpointer
)
async_checkpointer = pytest.fixture(scope="function", params=_ferry.ASYNC)(
    _ferry.async_checkpointer
)
PY

# --- which Ferry: the working tree, or a commit ----------------------------------------------
PYPATH="$WORK/deps:$WORK/plugin"
PGSERVER="$FERRY/tests/support/pgserver.py"
if [ -n "$FERRY_REF" ]; then
  mkdir -p "$WORK/ferry/code" "$WORK/ferry/support"
  git -C "$FERRY" archive "$FERRY_REF" graph | tar -x -C "$WORK/ferry/code"
  git -C "$FERRY" show "$FERRY_REF:tests/support/pgserver.py" >"$WORK/ferry/support/pgserver.py"
  PYPATH="$WORK/ferry/code:$PYPATH"
  PGSERVER="$WORK/ferry/support/pgserver.py"
  FERRY_AT="ferry $(git -C "$FERRY" rev-parse --short "$FERRY_REF") (committed tree, via git archive;"
  FERRY_AT="$FERRY_AT the working tree, not tested, had $(git -C "$FERRY" status --porcelain -- graph | wc -l) changed paths in graph/)"
else
  FERRY_AT="ferry $(git -C "$FERRY" rev-parse --short HEAD) working tree"
  if git -C "$FERRY" diff --quiet HEAD -- graph && [ -z "$(git -C "$FERRY" status --porcelain -- graph)" ]; then
    FERRY_AT="$FERRY_AT (graph/ clean)"
  else
    FERRY_AT="$FERRY_AT dirty: $(git -C "$FERRY" status --porcelain -- graph | wc -l) changed paths in graph/"
  fi
fi
GRAPH_FILE="$(cd /tmp && PYTHONPATH="$PYPATH" "$PY" -c 'import graph; print(graph.__file__)')"
echo "$FERRY_AT; graph imported from $GRAPH_FILE"

cd "$WORK/lg"
if [ -z "$FILES" ]; then
  FILES="$(grep -lE '\b(sync|async)_checkpointer\b' tests/test_*.py | tr '\n' ' ')"
fi
echo "files: $FILES"
echo "sync savers: $SYNC; async savers: $ASYNC; workers: $WORKERS"

{
  echo "langgraph $VERSION"
  "$PY" -m pip list --disable-pip-version-check 2>/dev/null \
    | grep -E '^(langgraph-checkpoint|langgraph-checkpoint-sqlite|langgraph-checkpoint-postgres|langchain-core|pytest|psycopg) ' || true
  echo "$FERRY_AT"
  echo "graph from $GRAPH_FILE"
  echo "ferry tree: $(git -C "$FERRY" status --porcelain | wc -l) uncommitted paths in all"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "source $DESCRIBED"
  echo "sync $SYNC"
  echo "async $ASYNC"
} >"$WORK/meta.txt"

set +e
start=$(date +%s)
env PYTHONPATH="$PYPATH" NO_DOCKER=true FERRY_PGSERVER="$PGSERVER" \
  FERRY_LG_SYNC="$SYNC" FERRY_LG_ASYNC="$ASYNC" FERRY_LG_REPORT="$WORK/report.jsonl" \
  "$PY" -m pytest $FILES -p no:asyncio -p no:recording -p no:benchmark -p no:codspeed \
  -p no:cacheprovider -o addopts="--strict-markers --strict-config --snapshot-warn-unused" \
  -o faulthandler_timeout=0 --timeout 300 -n "$WORKERS" -q -rN --tb=short \
  "${EXTRA[@]}" >"$WORK/pytest.log" 2>&1
rc=$?
end=$(date +%s)
set -e
echo "pytest exit $rc after $((end - start)) s" | tee -a "$WORK/meta.txt"
tail -3 "$WORK/pytest.log"

"$PY" "$HERE/summarize.py" "$WORK" | tee "$WORK/summary.md"

"""A small, real demo root: what ``rmtui demo`` opens the workbench on.

Everything in it is made the way real memory is made, so the demo shows the product and
not a mock: the memory lands through a manual-maintenance operation (so there is a landed
receipt with a diff), the Insight log lands through a supervised ``insight`` operation, and
the evidence is submitted with approval required, so it waits in the inbox.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import git

from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.gitutil import IDENTITY
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.roots import MemoryRoot, init_root
from rmtui.engine.writes import maintain
from rmtui.engine.writes.supervisor import Supervisor

DEMO_SESSION_A = "claude-session-7f3a"
DEMO_SESSION_B = "codex-session-19b2"

MEMORY_MD = """\
# Memory

# Tidewater service {#tidewater}

Tidewater ingests river-gauge readings and serves flood forecasts (Rust core, Python API).

- `tw-build` Build with `make build`; the Python bindings need `maturin develop` first. → [run:tw-tests]
- `tw-tests` Run `pytest -q`; the integration suite needs `TIDEWATER_DB` pointing at a scratch database. → [cfg:tw-config]
- `tw-config` Configuration lives in `tidewater.toml`; secrets come only from the environment. → []

## Ingestion {F#ingestion} → [rel:tw-config]

Polling, queueing and de-duplication of gauge readings.

## Conventions {#conventions}

- `conv-errors` Errors carry a stable code (`TW-E###`) so dashboards can group them. → [doc:conv-logging]
- `conv-logging` Log JSON lines with `gauge_id` on every record. → []
- `conv-format` Uncertain: the team may switch from `black` to `ruff format`; not decided yet. → []

## Operations {#operations}

### Incident runbook {M#runbook}

### Release checklist {S#release}
"""  # noqa: E501 - the demo memory is Markdown data: a node is one line, however long

MEMORY_INGESTION_MD = """\
How readings get from a gauge into the forecast store.

- `ing-poll` Gauges are polled every 5 minutes; the poller backs off exponentially after three timeouts. → [dep:ing-queue]
- `ing-queue` Readings pass through the Redis stream `gauge:raw` before validation. → [cfg:tw-config]
- `ing-dedupe` Duplicate readings are dropped by `(gauge_id, observed_at)`. → [dep:ing-queue]
"""  # noqa: E501 - the demo memory is Markdown data: a node is one line, however long

MEMORY_RUNBOOK_MD = """\
# Incident runbook

1. Check the `gauge:raw` stream length; above 10,000 the validators are behind.
2. Restart validators one at a time (`systemctl restart tidewater-validate@N`).
3. Post in #tidewater-ops with the TW-E code from the dashboard.
"""

MEMORY_SKILL_RELEASE_MD = """\
# Release checklist

- Bump the version in `Cargo.toml` and `pyproject.toml` together.
- Run the integration suite against a fresh scratch database.
- Tag `vX.Y.Z` and let CI publish the wheels.
"""

PURSUITS_MD = """\
# Pursuits

## Focus

- `flood-alerts`

## Ship flood alerts {#flood-alerts} → [rel:tidewater]

**State:** forecasts are computed; alert delivery is not wired yet.

**Done when:** a gauge crossing its threshold pages the on-call within two minutes.

**Next:**
- `do` wire the alert sender to the forecast stream
- `ask` which pager service the team uses

## Faster ingestion {F#faster-ingestion} → [rel:ingestion]
"""

PURSUIT_FASTER_INGESTION_MD = """\
Cut poll-to-store latency below 30 seconds.

- `fi-batch` Batch Redis reads by 100 readings instead of one at a time. → [dep:ing-queue]
- `fi-profile` Uncertain: the validator may be the bottleneck, not Redis. → [rel:ing-dedupe]
"""

INSIGHT_LOG = """\
# Insight {stamp}

## Configuration questions keep coming back

Three sessions this week asked where secrets and database settings live. Memory answers it
(`tw-config`), but the answer is not linked from the build and test notes, so agents that
start from `tw-build` miss it.

## Ingestion knowledge is spread out

Backoff, queueing and de-duplication are documented, but the latency pursuit
(`faster-ingestion`) has no node that records a measurement. A first profile run would
settle the uncertain `fi-profile` node.
"""

EVIDENCE = (
    (DEMO_SESSION_A, "req-backoff",
     "Ingestion: the poller now uses jittered backoff (base 2 s, cap 5 min) since PR #412.\n\n"
     "Seen while fixing test_poller_timeouts; the old fixed 3-timeout rule is gone.\n"),
    (DEMO_SESSION_A, "req-format",
     "The team decided on `ruff format` instead of black (sync meeting notes, pyproject updated).\n"),
    (DEMO_SESSION_B, "req-pager",
     "Alerts: the pager service is Opsgenie; its API key is read from OPSGENIE_KEY.\n"),
    (DEMO_SESSION_B, "req-docker",
     "Integration tests need Docker running: the Redis container is started by a fixture.\n"),
)
#: How many of EVIDENCE are approved at once (the rest wait in the inbox).
APPROVED = 1


def _write(base: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = base / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def land_insight_log(root: MemoryRoot, text: str, *, when: datetime | None = None,
                     summary: str = "insight: new log") -> Path:
    """Land one new ``insight_logs/YYYY-MM-DD-HHMMSS.md`` through a supervised insight run."""
    when = when or datetime.now(UTC)
    rel = f"insight_logs/{when.strftime('%Y-%m-%d-%H%M%S')}.md"
    with Supervisor(root) as sup:
        op = sup.begin("insight", "insight")
        wt = git.Repo(op.worktree)
        try:
            _write(Path(op.worktree), {rel: text})
            wt.git.add("--", rel)
            wt.git.commit("-q", "-m", summary, env=IDENTITY)
        finally:
            wt.close()
        sup.finish(op, summary=summary, message=summary)
    return root.path / rel


def create_demo_root(path: Path | str, *, now: datetime | None = None) -> MemoryRoot:
    """Create a demo root at ``path`` (which must not exist or be empty)."""
    now = now or datetime.now(UTC)
    root = init_root(path)

    op = maintain.begin(root)
    wt = Path(op.worktree)
    _write(wt, {
        "MEMORY.md": MEMORY_MD,
        "MEMORY_ingestion.md": MEMORY_INGESTION_MD,
        "MEMORY_runbook.md": MEMORY_RUNBOOK_MD,
        "MEMORY_SKILL_release.md": MEMORY_SKILL_RELEASE_MD,
        "PURSUITS.md": PURSUITS_MD,
        "PURSUIT_faster-ingestion.md": PURSUIT_FASTER_INGESTION_MD,
    })
    set_config_value(root.path, "update.approval", "required")  # rmtui.toml: untracked, lives in the root
    maintain.land(root, message="demo: seed the Tidewater memory")

    land_insight_log(root, INSIGHT_LOG.format(stamp=now.strftime("%Y-%m-%d %H:%M")), when=now,
                     summary="insight: configuration questions and ingestion gaps")

    queue = EvidenceQueue(root)
    try:
        uids = [queue.submit(session, text.encode(), request=request)["uid"]
                for session, request, text in EVIDENCE]
        queue.approve(uids[-APPROVED:])
    finally:
        queue.close()
    return root

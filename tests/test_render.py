"""Rendering and the selection schema (model-free): exact source text, in source order."""

from __future__ import annotations

import pytest

from rmtui.engine.errors import UsageError
from rmtui.engine.retrieval.corpus import build_corpus, load_corpus
from rmtui.engine.retrieval.render import NO_STRONG_MATCH, OutputTooLarge, render, resolve_selection, unit_of

MEMORY = """\
# Memory

## Tooling {#tooling} → [rel:deploy]

How we build and test this project.

- `pytest-x` Run pytest with -x when a failure cascades → []
- `ruff-fmt` Format with ruff, never black → [dep:pytest-x]
  (the CI lint step rejects black's output)

### Deploy {F#deploy}

### Incident notes {M#incidents}

### Release checklist {S#release}
"""

DEPLOY = """\
- `deploy-prod` Deploy to production only from main → []
- `deploy-canary` Canary runs 10 minutes before full rollout → []
"""

INCIDENTS = """\
# Incidents

2024-03-01 the cache stampede.

```sh
redis-cli FLUSHALL
# never again
```

After that we added jitter.
"""

RELEASE = "1. Bump the version.\n2. Tag it.\n"


@pytest.fixture
def mem(root):
    (root.path / "MEMORY.md").write_text(MEMORY)
    (root.path / "MEMORY_deploy.md").write_text(DEPLOY)
    (root.path / "MEMORY_incidents.md").write_text(INCIDENTS)
    (root.path / "MEMORY_SKILL_release.md").write_text(RELEASE)
    return root


def test_corpus_has_nodes_headings_with_body_and_sources(mem):
    c = build_corpus(mem.path)
    keys = [e.key for e in c.entries]
    assert keys[:3] == ["tooling", "pytest-x", "ruff-fmt"]
    assert "deploy-prod" in keys and "S#release" in keys
    assert any(k.startswith("M#incidents:") for k in keys)
    ruff = next(e for e in c.entries if e.key == "ruff-fmt")
    assert ruff.lines == [8, 9] and "black's output" in ruff.text  # continuation line kept
    prod = next(e for e in c.entries if e.key == "deploy-prod")
    assert "Tooling" in prod.context and "Deploy" in prod.context  # ancestors across the F# file
    assert prod.next == keys.index("deploy-canary")


def test_embedding_units_render_exact_source_in_source_order(mem):
    c = build_corpus(mem.path)
    by = {e.key: e for e in c.entries}
    # ranked order differs from source order: rendering restores source order
    units = [unit_of(by["deploy-canary"]), unit_of(by["ruff-fmt"]), unit_of(by["pytest-x"])]
    text = render(c, units, max_chars=10_000).text
    assert text == (
        "# Memory\n\n"
        "## Tooling {#tooling} → [rel:deploy]\n\n"
        "- `pytest-x` Run pytest with -x when a failure cascades → []\n"
        "- `ruff-fmt` Format with ruff, never black → [dep:pytest-x]\n"
        "  (the CI lint step rejects black's output)\n\n"
        "### Deploy {F#deploy}\n\n"
        "- `deploy-canary` Canary runs 10 minutes before full rollout → []"
    )


def test_selection_heading_selects_subtree_across_backing_file(mem):
    c = load_corpus(mem.path)
    units = resolve_selection(c, {"ids": ["deploy"], "sources": [], "recent_candidates": []})
    text = render(c, units, max_chars=10_000).text
    assert "- `deploy-prod` Deploy to production only from main → []" in text
    assert "- `deploy-canary`" in text
    assert text.index("## Tooling") < text.index("### Deploy {F#deploy}") < text.index("deploy-prod")


def test_selection_sources_ranges_keep_whole_fences_and_skill_is_whole(mem):
    c = load_corpus(mem.path)
    sel = {"ids": [], "recent_candidates": [],
           "sources": [{"source_id": "M#incidents", "ranges": [{"start": 6, "end": 6}]},
                       {"source_id": "S#release"}]}
    units = resolve_selection(c, sel)
    text = render(c, units, max_chars=10_000).text
    # line 6 sits inside the fence: the whole fenced block comes back
    assert "```sh\nredis-cli FLUSHALL\n# never again\n```" in text
    assert "Source: `M#incidents` lines 5-8" in text
    assert "1. Bump the version.\n2. Tag it." in text


@pytest.mark.parametrize("selection, message", [
    ({"ids": [], "sources": [], "recent_candidates": [], "answer": "x"}, "unknown keys: answer"),
    ({"ids": ["no-such-id"]}, "unknown ids: no-such-id"),
    ({"ids": "pytest-x"}, "ids must be a list"),
    ({"sources": [{"source_id": "M#incidents"}]}, "needs at least one line range"),
    ({"sources": [{"source_id": "M#incidents", "ranges": [{"start": 1, "end": 99}]}]}, "outside"),
    ({"sources": [{"source_id": "M#incidents", "ids": ["x"], "ranges": [{"start": 1, "end": 2}]}]}, "not ids"),
    ({"sources": [{"source_id": "S#release", "ranges": [{"start": 1, "end": 1}]}]}, "complete skill"),
    ({"sources": [{"source_id": "M#incidents", "ranges": [{"start": 1, "end": 2, "x": 1}]}]}, "ranges items"),
    ({"sources": [{"source_id": "X#y"}]}, "source_id must be"),
    ({"sources": [{"source_id": "M#nope", "ranges": [{"start": 1, "end": 1}]}]}, "unknown source"),
    ({"sources": [{"source_id": "S#release", "extra": 1}]}, "unknown keys: extra"),
    ({"recent_candidates": ["abc"]}, "unknown recent candidates: abc"),
    (["pytest-x"], "must be a JSON object"),
])
def test_selection_schema_rejects_bad_selections(mem, selection, message):
    c = load_corpus(mem.path)
    with pytest.raises(UsageError) as exc:
        resolve_selection(c, selection)
    assert message in exc.value.message


def test_recent_candidates_render_after_memory(mem):
    c = load_corpus(mem.path)
    units = resolve_selection(c, {"ids": ["pytest-x"], "recent_candidates": ["u1"]},
                              recent={"u1": ("submitted 2024-01-01", "the flaky test is in test_io.py")})
    text = render(c, units, max_chars=10_000).text
    assert text.index("pytest-x") < text.index("Pending evidence `u1`")
    assert "the flaky test is in test_io.py" in text


def test_heading_with_its_children_is_shown_once(mem):
    c = load_corpus(mem.path)
    text = render(c, resolve_selection(c, {"ids": ["tooling", "pytest-x"]}), max_chars=10_000).text
    assert text.count("## Tooling {#tooling}") == 1
    assert text.count("### Incident notes {M#incidents}") == 1 and text.count("### Release checklist") == 1
    # a heading brings the graph under it, never the free-form text of an M# file or S# skill
    assert "Source: `M#incidents`" not in text and "# Incidents" not in text and "Bump the version" not in text
    assert "- `deploy-prod`" in text  # an F# backing file is graph: it comes along
    assert text.startswith("# Memory\n\n## Tooling {#tooling} → [rel:deploy]\n\nHow we build and test this project.")
    assert text.index("How we build") < text.index("- `pytest-x`") < text.index("### Deploy {F#deploy}")


def test_a_selected_m_or_s_heading_is_its_line_and_the_text_comes_through_sources(mem):
    """The heading id tells the caller the text exists and when it applies; the text is asked for."""
    c = load_corpus(mem.path)
    text = render(c, resolve_selection(c, {"ids": ["incidents", "release"]}), max_chars=10_000).text
    assert "### Incident notes {M#incidents}" in text and "### Release checklist {S#release}" in text
    assert "cache stampede" not in text and "Bump the version" not in text
    asked = resolve_selection(c, {"ids": ["incidents"], "sources": [{"source_id": "S#release"}]})
    text = render(c, asked, max_chars=10_000).text
    assert "1. Bump the version.\n2. Tag it." in text and "cache stampede" not in text


def test_output_over_limit_is_an_error_not_a_truncation(mem):
    c = load_corpus(mem.path)
    units = resolve_selection(c, {"ids": ["tooling"]})
    full = render(c, units, max_chars=100_000).text
    with pytest.raises(OutputTooLarge) as exc:
        render(c, units, max_chars=len(full) - 1)
    assert exc.value.exit_code == 2 and str(len(full)) in exc.value.message
    assert render(c, units, max_chars=len(full)).text == full


def test_nothing_selected_is_no_strong_match(mem):
    c = load_corpus(mem.path)
    assert render(c, [], max_chars=100).text == NO_STRONG_MATCH


def test_corpus_cache_follows_file_content(mem):
    first = load_corpus(mem.path)
    again = load_corpus(mem.path)
    assert again.fingerprint == first.fingerprint and [e.hash for e in again.entries] == [e.hash for e in first.entries]
    (mem.path / "MEMORY_deploy.md").write_text(DEPLOY.replace("10 minutes", "20 minutes"))
    changed = load_corpus(mem.path)
    assert changed.fingerprint != first.fingerprint
    old = {e.key: e.hash for e in first.entries}
    new = {e.key: e.hash for e in changed.entries}
    differ = {k for k in new if new[k] != old.get(k)}
    # the node changed, and so did the headings whose block pulls in that backing file
    assert "deploy-canary" in differ and "deploy-prod" not in differ and "pytest-x" not in differ

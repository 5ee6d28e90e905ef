"""`rmtui --headless retrieve` end to end: a real CLI process against a real HTTP service."""

from __future__ import annotations

import pytest

from rmtui.engine.memory.config import set_config_value
from tests.retrieve_kit import (
    PEOPLE,
    TOKEN,
    write_small_root,
)

ENV = {"RMTUI_TEST_TOKEN": TOKEN}


@pytest.fixture
def small(root, service):
    write_small_root(root)
    set_config_value(root.path, "embedding.service_url", service.url)
    set_config_value(root.path, "embedding.service_token_env", "RMTUI_TEST_TOKEN")
    return root


def ask(cli, root, session, need, *extra):
    return cli("--headless", "retrieve", "--json", "--root", str(root.path), "--session", session, *extra,
               need, env=ENV)


def test_retrieve_returns_exact_source_text_and_ranked_results(cli, small):
    r = ask(cli, small, "s1", "who looks after the billing database?", "--top", "2")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["mode"] == "hybrid" and out["dense_coverage"] == 1.0
    assert [x["id"] for x in out["results"]][0] == "bob-role"
    assert len(out["results"]) == 2
    first = out["results"][0]
    assert set(first) >= {"id", "score", "file", "start_line", "end_line"}
    assert (first["file"], first["start_line"], first["end_line"]) == ("MEMORY_people.md", 2, 2)
    # exact source line under its ancestor headings, in source order
    text = out["text"]
    assert text.startswith("# Memory\n\n## People {F#people}\n\n- `")
    assert "\n- `bob-role` Bob owns the billing service and its database migrations → []" in text
    second = out["results"][1]["id"]
    lines = {"alice-tz": 1, "bob-role": 2, "carol-dog": 3}
    if second in lines:  # both in one file: source order, whatever the rank
        assert (text.index(second) < text.index("bob-role")) == (lines[second] < 2)
    plain = cli("--headless", "retrieve", "--root", str(small.path), "--session", "s-plain", "--top", "1",
                "billing database owner", env=ENV)
    assert plain.code == 0 and plain.stdout.strip().endswith("database migrations → []")


def test_paraphrase_found_by_dense_and_identifier_by_bm25(cli, small):
    dog = ask(cli, small, "s2", "does anyone on the team have a pet?", "--top", "1").json()
    assert dog["results"][0]["id"] == "carol-dog"  # no shared word: dense similarity
    flaky = ask(cli, small, "s3", "test_socket_timeout", "--top", "1").json()
    assert flaky["results"][0]["id"] == "pytest-flaky"  # an exact identifier: BM25


def test_delivery_history_skips_unchanged_and_include_returned(cli, small):
    first = ask(cli, small, "sess", "Bob billing migrations", "--top", "1").json()
    assert first["results"][0]["id"] == "bob-role" and first["results"][0]["status"] == "new"
    again = ask(cli, small, "sess", "Bob billing migrations", "--top", "1").json()
    assert again["results"] == [] and again["skipped"] == ["bob-role"]
    assert "already delivered" in again["text"] and "--include-returned" in again["text"]
    back = ask(cli, small, "sess", "Bob billing migrations", "--top", "1", "--include-returned").json()
    assert back["results"][0]["id"] == "bob-role" and back["results"][0]["status"] == "returned"
    assert "Bob owns the billing service" in back["text"]
    # another session has its own history
    other = ask(cli, small, "other", "Bob billing migrations", "--top", "1").json()
    assert other["results"][0]["status"] == "new"


def test_changed_delivered_item_comes_with_a_notice(cli, small):
    ask(cli, small, "chg", "Bob billing migrations", "--top", "1")
    ask(cli, small, "chg", "Alice Lisbon meetings", "--top", "1")
    (small.path / "MEMORY_people.md").write_text(
        PEOPLE.replace("Bob owns the billing service", "Bob owns the billing and invoicing services")
        .replace("prefers meetings in the morning", "prefers meetings after lunch"))
    out = ask(cli, small, "chg", "Bob billing migrations", "--top", "1").json()
    assert out["results"][0]["id"] == "bob-role" and out["results"][0]["status"] == "changed"
    assert "(changed since last delivered" in out["text"] and "invoicing" in out["text"]
    notices = {n["key"]: n for n in out["notices"]}
    assert notices["bob-role"]["selected"] is True
    # alice-tz changed too but was not asked for: a notice, once
    assert notices["alice-tz"] == {"id": "alice-tz", "key": "alice-tz", "change": "changed", "selected": False}
    assert "`alice-tz`, delivered earlier in this session, has changed" in out["text"]
    later = ask(cli, small, "chg", "docker layer cache", "--top", "1").json()
    assert all(n["key"] != "alice-tz" for n in later["notices"])


def test_oversize_output_is_an_error_not_a_truncation(cli, small):
    set_config_value(small.path, "retrieve.max_output_chars", 60)
    r = ask(cli, small, "big", "Bob billing migrations", "--top", "3")
    assert r.code == 2
    assert r.json()["error"] == "bad_input" and "max_output_chars" in r.json()["message"]
    assert "nothing was truncated" in r.stderr


def test_no_strong_match(cli, small):
    set_config_value(small.path, "retrieve.min_similarity", 0.9)
    out = ask(cli, small, "nm", "quantum chromodynamics lattice", "--top", "3").json()
    assert out["text"] == "no strong match" and out["results"] == []


def test_service_down_degrades_to_bm25_with_warning(cli, small):
    set_config_value(small.path, "embedding.service_url", "http://127.0.0.1:9")
    r = ask(cli, small, "down", "test_socket_timeout flaky", "--top", "1")
    assert r.code == 0
    assert "warning" in r.stderr and "unavailable" in r.stderr and "BM25 only" in r.stderr
    out = r.json()
    assert out["mode"] == "lexical" and out["results"][0]["id"] == "pytest-flaky"
    assert out["warnings"]
    set_config_value(small.path, "embedding.fallback_lexical", False)
    strict = ask(cli, small, "down2", "test_socket_timeout flaky", "--top", "1")
    assert strict.code == 4 and strict.json()["error"] == "unavailable"


def test_bad_input(cli, small):
    assert ask(cli, small, "s", "   ").code == 2
    assert ask(cli, small, "bad/session", "anything").code == 2
    assert ask(cli, small, "s", "anything", "--top", "0").code == 2


def test_cli_process_never_imports_torch(small, service):
    """Run the real command in a fresh interpreter and look at what it imported."""
    import json
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib\n"
        "from rmtui.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        f"    rc = main(['--headless', 'retrieve', '--json', '--root', {str(small.path)!r}, '--session', 't',"
        " 'billing owner'])\n"
        "print(rc, 'torch' in sys.modules, 'sentence_transformers' in sys.modules, 'bm25s' in sys.modules,"
        " len(__import__('json').loads(buf.getvalue())['results']))\n"
    )
    import os

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **ENV}, timeout=120)
    rc, torch, st, bm25s, n = proc.stdout.split()
    assert (rc, torch, st) == ("0", "False", "False"), proc.stderr
    assert int(n) > 0
    # a warm call (index cached) does not even import bm25s
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **ENV}, timeout=120)
    assert proc.stdout.split()[3] == "False"
    assert json.loads  # keep the import used


def test_dense_index_completes_in_the_background(cli, small):
    """A call with no time to embed ranks lexically now and leaves an indexer to finish the job."""
    import time

    from rmtui.engine.locks import try_lock

    set_config_value(small.path, "embedding.dense_budget_seconds", 0)
    first = ask(cli, small, "bg1", "who owns billing", "--top", "1")
    assert first.code == 0 and first.json()["dense_coverage"] == 0.0
    assert "dense index incomplete" in first.stderr
    lock = small.runtime / "cache" / "indexer.lock"
    deadline = time.monotonic() + 60
    polls = 0
    while time.monotonic() < deadline:
        polls += 1
        fd = try_lock(lock)
        if fd is not None:
            import os

            os.close(fd)
            out = ask(cli, small, f"bg2-{polls}", "does anyone have a dog", "--top", "1").json()
            if out["dense_coverage"] == 1.0:
                break
        time.sleep(0.2)
    assert out["dense_coverage"] == 1.0 and out["mode"] == "hybrid"
    assert out["results"][0]["id"] == "carol-dog"

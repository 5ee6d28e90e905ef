"""rightmemory.toml in the original's schema, rmtui.toml beside it
(docs/architecture.md, "The memory root"; docs/formats.md, "Configuration").

rmtui loads every key RightMemory accepts (using those it has a feature for and saying which
it ignores), refuses keys neither tool knows, writes only original keys into
rightmemory.toml, and moves an older root's rmtui-only keys to rmtui.toml.
"""

from __future__ import annotations

import math

import git
import pytest
import tomlkit

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.config import (
    CONFIG_FILE,
    LOCAL_FILE,
    embedding_service,
    ignored_keys,
    load_config,
    set_config_value,
)
from rmtui.engine.roles.executors import config as _executors  # noqa: F401  (executor tables in use)
from rmtui.engine.roles.executors.config import resolve_role_executor
from tests.retrieve_kit import TOKEN, write_small_root

# -- the original's key list (docs/formats.md, "Configuration"), written once -----------------------------

ROLE_TABLES = ("dreamer", "historian", "insight", "pruner", "retrieve", "reviewer", "shared-view-builder",
               "sync-reconciler", "update")
ORIGINAL_KEYS = frozenset(
    {f"{role}.model.{k}" for role in ROLE_TABLES for k in ("model_id", "api_base", "api_key", "kwargs")}
    | {f"{role}.agent_cli.{k}" for role in ROLE_TABLES for k in ("provider", "model")}
    | {f"{w}.watch.{k}" for w in ("dreamer", "insight")
       for k in ("trigger_points", "update_candidate_points", "check_interval_seconds", "review_session_points")}
    | {
        "agent_cli.provider",
        "retrieve.max_output_chars", "retrieve.backend",
        "retrieve.embedding.url", "retrieve.embedding.candidate_count", "retrieve.embedding.result_count",
        "retrieve.embedding.timeout_seconds", "retrieve.embedding.api_key",
        "update.async.target_batch_candidates", "update.async.max_wait_seconds", "update.async.trigger_candidates",
        "pruner.generation_commits", "pruner.revival_grace_checkpoints",
        "review.idle_seconds", "review.since_days", "review.batch_size", "review.sources",
        "debug.trace",
        "sync.enabled", "sync.stale_pull_after_hours",
    }
)


def leaf_keys(data: dict, prefix: str = "") -> set[str]:
    """Dotted keys of a parsed TOML file (model kwargs and arrays of tables count as one key)."""
    out: set[str] = set()
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and not dotted.endswith(".kwargs"):
            out |= leaf_keys(value, dotted + ".")
        else:
            out.add(dotted)
    return out


def only_original_keys(path) -> set[str]:
    """The keys of ``path`` the original does not know (empty: the original loads it)."""
    return leaf_keys(tomlkit.parse(path.read_text(encoding="utf-8")).unwrap()) - ORIGINAL_KEYS


# -- a root configured by hand for RightMemory, every table of docs/formats.md, "Configuration" ---

ORIGINAL_TOML = """\
# written for RightMemory
[agent_cli]
provider = "codex"

[update.model]
model_id = "openai:gpt-5"
api_base = "http://127.0.0.1:9/v1"
kwargs = {{ temperature = 0.2 }}

[update.async]
target_batch_candidates = 12
max_wait_seconds = 7200
trigger_candidates = 5

[dreamer.agent_cli]
provider = "claude"
model = "sonnet"

[dreamer.watch]
trigger_points = 50
update_candidate_points = 1.0
check_interval_seconds = 3000
review_session_points = 1.5

[insight.watch]
trigger_points = 150
update_candidate_points = 1.0
check_interval_seconds = 3000

[pruner]
generation_commits = 70
revival_grace_checkpoints = 2

[pruner.model]
model_id = "anthropic:claude-sonnet-4-5"
api_key = "sk-in-the-file"

[historian.agent_cli]
provider = "codex"

[reviewer.model]
model_id = "openai:gpt-5-mini"

[shared-view-builder.agent_cli]
provider = "claude"

[sync-reconciler.agent_cli]
provider = "claude"
model = "opus"

[retrieve]
max_output_chars = 100000
backend = "embedding"

[retrieve.embedding]
url = "{url}"
candidate_count = 3
result_count = 2
timeout_seconds = 30
api_key = "{token}"

[review]
idle_seconds = 21600
since_days = 3
batch_size = 3

[[review.sources]]
kind = "codex"
path = "~/.codex/sessions"

[[review.sources]]
kind = "claude"
path = "~/.claude/projects"

[debug]
trace = false

[sync]
enabled = false
stale_pull_after_hours = 24
"""

#: Keys of ORIGINAL_TOML rmtui has no feature for, whatever else it grows (no Dreamer, no
#: transcript review, no shared-view builder; dreamer's executor is not inherited here) ...
IGNORED = {
    "dreamer.agent_cli",
    "dreamer.watch.check_interval_seconds", "dreamer.watch.review_session_points", "dreamer.watch.trigger_points",
    "dreamer.watch.update_candidate_points",
    "review.batch_size", "review.idle_seconds", "review.since_days", "review.sources",
    "reviewer.model", "shared-view-builder.agent_cli",
}
#: ... and keys it does use.
USED = {"update.model", "update.async.target_batch_candidates", "update.async.max_wait_seconds", "pruner.model",
        "retrieve.max_output_chars", "retrieve.backend", "retrieve.embedding", "agent_cli.provider", "debug.trace",
        "historian.agent_cli", "sync-reconciler.agent_cli", "sync.enabled"}


def check_ignored(listed: list[str]) -> None:
    """``status`` lists what rmtui ignores: sorted, every foreign feature, nothing it uses."""
    assert listed == sorted(listed) and set(listed) >= IGNORED
    assert not [key for key in listed for used in USED if key == used or key.startswith(used + ".")]


def write_original(root, text: str, *, commit: bool = True) -> None:
    (root.path / LOCAL_FILE).unlink(missing_ok=True)  # a root made by the original has no rmtui.toml
    (root.path / CONFIG_FILE).write_text(text, encoding="utf-8")
    if commit:
        repo = git.Repo(root.path)
        repo.index.add([CONFIG_FILE])
        repo.index.commit("config: written for RightMemory")


def test_every_original_section_loads_and_is_read(root):
    text = ORIGINAL_TOML.format(url="http://127.0.0.1:8766", token="tok")
    assert only_original_keys_text(text) == set()  # the fixture itself is the original's schema
    write_original(root, text)
    cfg = load_config(root.path)
    assert cfg.notices == []
    assert (root.path / CONFIG_FILE).read_text(encoding="utf-8") == text  # nothing rewritten
    assert not (root.path / LOCAL_FILE).exists()
    assert cfg.get("update.async.target_batch_candidates") == 12 and cfg.get("update.async.max_wait_seconds") == 7200
    assert cfg.get("retrieve.max_output_chars") == 100000 and cfg.get("debug.trace") is False
    assert cfg.get("review.sources")[1] == {"kind": "claude", "path": "~/.claude/projects"}
    assert cfg.get("update.approval") == "auto" and cfg.get("retrieve.top_k") == 8  # rmtui defaults
    svc = embedding_service(cfg)
    assert (svc.url, svc.api_key, svc.timeout_seconds, svc.candidate_count, svc.result_count, svc.original) == \
        ("http://127.0.0.1:8766", "tok", 30.0, 3, 2, True)
    check_ignored(ignored_keys(cfg))
    # executors: own tables, else update's (first in the original's order), api_key honoured
    pruner = resolve_role_executor(cfg, "pruner")
    assert (pruner.source_role, pruner.settings.provider, pruner.settings.api_key) == \
        ("pruner", "anthropic", "sk-in-the-file")
    insight = resolve_role_executor(cfg, "insight")
    assert insight.source_role == "update" and insight.settings.kwargs == {"temperature": 0.2}
    sync = resolve_role_executor(cfg, "sync-reconciler")
    assert (sync.kind, sync.settings.provider, sync.settings.model) == ("agent_cli", "claude", "opus")
    retrieve = resolve_role_executor(cfg, "retrieve")  # never inherits: only the global provider
    assert (retrieve.source_role, retrieve.settings.provider, retrieve.borrowed) == ("agent_cli", "codex", True)


def only_original_keys_text(text: str) -> set[str]:
    return leaf_keys(tomlkit.parse(text).unwrap()) - ORIGINAL_KEYS


def test_headless_status_submit_and_retrieve_on_an_original_config(root, service, cli):
    write_small_root(root)
    text = ORIGINAL_TOML.format(url=service.url, token=TOKEN)  # the service's key sits in the file
    write_original(root, text)
    rp = str(root.path)

    st = cli("--headless", "status", "--json", "--root", rp)
    assert st.code == 0, st.stderr
    conf = st.json()["config"]
    check_ignored(conf["ignored"])
    assert len(conf["warnings"]) == 1
    assert "[pruner.model] api_key" in conf["warnings"][0] and "[retrieve.embedding] api_key" in conf["warnings"][0]
    plain = cli("--headless", "status", "--root", rp)
    assert plain.code == 0
    assert "ignored by rmtui" in plain.stdout and "review.sources" in plain.stdout
    assert "warning: rightmemory.toml holds an API key" in plain.stdout and "tracked" in plain.stdout

    sub = cli("--headless", "submit", "--json", "--root", rp, "--session", "s1",
              input="Bob moved to the payments team\n")
    assert sub.code == 0, sub.stderr
    assert sub.json()["queue_state"] == "queued"

    # retrieval goes through [retrieve.embedding]: its url and key, result_count items by default
    r = cli("--headless", "retrieve", "--json", "--root", rp, "--session", "s1", "who owns the billing database?",
            env={"RIGHTMEMORY_EMBEDDING_API_KEY": ""})
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["mode"] == "hybrid" and out["via"] == "cli" and not out.get("warnings")
    assert len(out["results"]) == 2 and out["results"][0]["id"] == "bob-role"
    assert (root.path / CONFIG_FILE).read_text(encoding="utf-8") == text
    assert not (root.path / LOCAL_FILE).exists()


def test_embedding_api_key_from_the_environment(root, monkeypatch):
    text = ORIGINAL_TOML.format(url="https://embed.example:8443/", token="x").replace('api_key = "x"\n', "")
    write_original(root, text, commit=False)
    monkeypatch.setenv("RIGHTMEMORY_EMBEDDING_API_KEY", "from-env")
    assert embedding_service(load_config(root.path)).api_key == "from-env"
    monkeypatch.delenv("RIGHTMEMORY_EMBEDDING_API_KEY")
    assert embedding_service(load_config(root.path)).api_key is None


# -- refusals ------------------------------------------------------------------------------------

def submit(cli, root, *extra):
    """A command that loads the config (submit reads the approval mode and the size limit)."""
    return cli("--headless", "submit", "--session", "s1", "--root", str(root.path), *extra, input="evidence\n")


def test_a_key_neither_tool_knows_is_refused_with_the_nearest_key(root, cli):
    text = ORIGINAL_TOML.format(url="http://127.0.0.1:8766", token="t").replace("candidate_count = 3",
                                                                             "candidat_count = 3")
    write_original(root, text)
    r = submit(cli, root)
    assert r.code == 2
    assert str(root.path / CONFIG_FILE) in r.stderr
    assert "unknown key 'retrieve.embedding.candidat_count'" in r.stderr
    assert "nearest known key: 'retrieve.embedding.candidate_count'" in r.stderr
    assert (root.path / CONFIG_FILE).read_text(encoding="utf-8") == text
    # status and config get still work, so the file can be seen and fixed
    st = cli("--headless", "status", "--root", str(root.path))
    assert st.code == 0 and "config: refused" in st.stdout and "'retrieve.embedding.candidate_count'" in st.stdout
    got = cli("--headless", "config", "get", "retrieve.embedding.url", "--root", str(root.path))
    assert got.code == 0 and got.stdout.strip() == "http://127.0.0.1:8766"
    assert "candidat_count" in got.stderr and len(got.stderr.strip().splitlines()) == 1

    write_original(root, "[reviwer.model]\nmodel_id = \"openai:gpt-5\"\n", commit=False)
    r = submit(cli, root, "--json")
    assert r.code == 2 and "'reviewer'" in r.json()["message"]
    st = cli("--headless", "status", "--json", "--root", str(root.path))
    assert st.code == 0 and "'reviewer'" in st.json()["config"]["error"] and st.json()["cycles"] == []

    (root.path / CONFIG_FILE).write_text("", encoding="utf-8")
    (root.path / LOCAL_FILE).write_text("[embedding]\nmodle = \"x\"\n", encoding="utf-8")
    r = submit(cli, root)
    assert r.code == 2 and str(root.path / LOCAL_FILE) in r.stderr and "'embedding.model'" in r.stderr
    got = cli("--headless", "config", "get", "embedding.model", "--root", str(root.path))
    assert got.code == 0 and "'embedding.model'" in got.stderr
    # an original key belongs in rightmemory.toml, never in rmtui.toml
    (root.path / LOCAL_FILE).write_text("[sync]\nenabled = true\n", encoding="utf-8")
    r = submit(cli, root)
    assert r.code == 2 and "'sync.enabled' belongs in rightmemory.toml" in r.stderr
    # a file that is not TOML at all cannot be shown: the error names where it breaks
    (root.path / LOCAL_FILE).write_text("[sync\n", encoding="utf-8")
    got = cli("--headless", "config", "get", "sync.enabled", "--root", str(root.path))
    assert got.code == 2 and "malformed TOML" in got.stderr


@pytest.mark.parametrize("text,message", [
    ("[pruner]\ngeneration_commits = true\n", "'pruner.generation_commits' must be int, got bool"),
    ("[pruner]\nrevival_grace_checkpoints = 0\n", "'pruner.revival_grace_checkpoints' must be at least 1"),
    ("[update.async]\nmax_wait_seconds = 1.5\n", "'update.async.max_wait_seconds' must be int"),
    ("[dreamer.watch]\ntrigger_points = 0\n", "'dreamer.watch.trigger_points' must be above 0"),
    ("[update.model]\napi_base = \"http://x\"\n", "[update.model] needs model_id"),
    ("[update.model]\nmodel_id = \"openai:x\"\napi_key = \"  \"\n", "'update.model.api_key' must be a non-empty"),
    ("[update.model]\nmodel_id = \"openai:x\"\nkwargs = { api_key = \"k\" }\n", "must not redefine api_key"),
    ("[update.agent_cli]\nprovider = \"gemini\"\n", "'update.agent_cli.provider' must be one of"),
    ("[agent_cli]\nprovider = \"aider\"\n", "'agent_cli.provider' must be one of"),
    ("[retrieve.embedding]\nurl = \"http://h:1\"\n", 'needs backend = "embedding"'),
    ("[retrieve]\nbackend = \"embedding\"\n[retrieve.model]\nmodel_id = \"openai:x\"\n[retrieve.embedding]\n"
     "url = \"http://h:1\"\n", "cannot be combined with [retrieve.model]"),
    ("[retrieve]\nbackend = \"embedding\"\n[retrieve.embedding]\nurl = \"http://u:p@h:1\"\n", "user information"),
    ("[retrieve]\nbackend = \"embedding\"\n[retrieve.embedding]\nurl = \"http://h:99999\"\n", "invalid port"),
    ("[retrieve]\nbackend = \"embedding\"\n[retrieve.embedding]\nurl = \"ftp://h\"\n", "http(s) URL"),
    ("[retrieve]\nbackend = \"embedding\"\n[retrieve.embedding]\nurl = \"http://h\"\nresult_count = 50\n",
     "must not exceed candidate_count (40)"),
    ("[retrieve]\nbackend = \"embedding\"\n[retrieve.embedding]\nurl = \"http://h\"\ntimeout_seconds = inf\n",
     "must be a finite number"),
    ("[[review.sources]]\nkind = \"vim\"\npath = \"~/x\"\n", "'review.sources[0].kind' must be one of"),
    ("[[review.sources]]\nkind = \"codex\"\n", "needs 'path'"),
    ("[sync]\nenabled = \"yes\"\n", "'sync.enabled' must be bool"),
])
def test_the_originals_rules_are_enforced(root, text, message):
    # a rule of an executor table refuses the role that runs on it (here update, which every
    # table above reaches), as the original refuses it; every other rule refuses the file
    write_original(root, text, commit=False)
    with pytest.raises(UsageError) as err:
        resolve_role_executor(load_config(root.path), "update")
    assert message in err.value.message and str(root.path / CONFIG_FILE) in err.value.message


def test_review_kinds_are_case_insensitive_like_the_original(root):
    write_original(root, "[[review.sources]]\nkind = \"Codex\"\npath = \"~/x\"\n", commit=False)
    assert load_config(root.path).get("review.sources") == [{"kind": "Codex", "path": "~/x"}]


# -- writing: only original keys in rightmemory.toml ---------------------------------------------------

def test_init_and_set_write_only_original_keys(tmp_path, cli):
    target = tmp_path / "fresh"
    assert cli("--headless", "init", str(target)).code == 0
    assert only_original_keys(target / CONFIG_FILE) == set()
    # rmtui's own retrieval backend choice ("embedding" | "agent") is rmtui's; the original's
    # backend = "embedding" only comes with [retrieve.embedding], in rightmemory.toml
    local_keys = leaf_keys(tomlkit.parse((target / LOCAL_FILE).read_text(encoding="utf-8")).unwrap())
    assert local_keys & ORIGINAL_KEYS == {"retrieve.backend"}
    rp = str(target)
    for key, value in [("update.approval", '"required"'), ("retrieve.top_k", "5"), ("embedding.rerank_top", "12"),
                       ("update.model.max_requests", "9"), ("update.model.api_key_env", '"MY_KEY"'),
                       ("retrieve.backend", '"agent"'), ("embedding.idle_timeout_seconds", "60"),
                       ("assistant.lease_seconds", "60"),
                       ("update.async.debounce_seconds", "10"), ("update-correction.model.model_id", '"openai:x"'),
                       ("update.model.model_id", '"openai:gpt-5"'), ("pruner.generation_commits", "80"),
                       ("update.async.target_batch_candidates", "4")]:
        r = cli("--headless", "config", "set", key, value, "--root", rp, "--json")
        assert r.code == 0, (key, r.stderr)
        assert r.json()["file"] == (CONFIG_FILE if key in ORIGINAL_KEYS - {"retrieve.backend"} else LOCAL_FILE)
    assert only_original_keys(target / CONFIG_FILE) == set()
    got = cli("--headless", "config", "get", "update.model.max_requests", "--root", rp, "--json").json()
    assert got == {"key": "update.model.max_requests", "value": 9, "file": LOCAL_FILE}
    # the original needs backend = "embedding" with [retrieve.embedding]: set together
    assert cli("--headless", "config", "set", "retrieve.embedding.url", "http://127.0.0.1:8766", "--root", rp).code == 0
    data = tomlkit.parse((target / CONFIG_FILE).read_text(encoding="utf-8")).unwrap()
    assert data["retrieve"]["backend"] == "embedding"
    assert data["retrieve"]["embedding"]["url"] == "http://127.0.0.1:8766"
    assert only_original_keys(target / CONFIG_FILE) == set()
    repo = git.Repo(target)
    assert repo.ignored(LOCAL_FILE) == [LOCAL_FILE]
    assert LOCAL_FILE not in repo.git.ls_files()


# -- migration of an older rmtui root ----------------------------------------------------------------------

OLD_RMTUI_TOML = """\
# rightmemory.toml: configuration of this memory root.

[update]
# "auto" queues evidence for Update at once; "required" holds it in an inbox.
approval = "required"
# Largest evidence text accepted by submit, in bytes.
max_evidence_bytes = 4096

[update.async]
# A batch forms when this many candidates are ready ...
target_batch_candidates = 7
# ... or this long after a session's last submit ...
debounce_seconds = 120
max_wait_seconds = 86400

[update.model]
model_id = "openai:gpt-5"
api_key_env = "MY_OPENAI"
max_requests = 12

[retrieve]
backend = "embedding"
max_output_chars = 50000
# How many ranked items retrieve returns.
top_k = 4

[embedding]
# Sentence-transformers model name.
model = "all-MiniLM-L6-v2"
dense_budget_seconds = 3

[assistant]
lease_seconds = 600

[insight]
threshold = 120
"""

MOVED = ["update.approval", "update.max_evidence_bytes", "update.async.debounce_seconds", "update.model.api_key_env",
         "update.model.max_requests", "retrieve.backend", "retrieve.top_k", "embedding", "assistant"]


def old_root(root):
    write_original(root, OLD_RMTUI_TOML)
    return git.Repo(root.path).head.commit.hexsha


def tree_state(folder) -> dict[str, tuple[int, bytes | None]]:
    """Every path under ``folder`` (Git's files included): its mtime and, for a file, its bytes."""
    out = {".": (folder.stat().st_mtime_ns, None)}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(folder))] = (st.st_mtime_ns, path.read_bytes() if path.is_file() else None)
    return out


OLD_VALUES = {
    "update.approval": "required", "update.max_evidence_bytes": 4096, "update.async.debounce_seconds": 120,
    "update.model.api_key_env": "MY_OPENAI", "update.model.max_requests": 12,
    "update.model.model_id": "openai:gpt-5",
    "retrieve.top_k": 4, "retrieve.max_output_chars": 50000, "embedding.dense_budget_seconds": 3,
    "assistant.lease_seconds": 600, "insight.watch.trigger_points": 120,
    "update.async.target_batch_candidates": 7}


def test_loading_an_older_root_reads_it_and_writes_nothing(root, cli):
    old_root(root)
    before = tree_state(root.path)
    told: list[str] = []
    import rmtui.engine.memory.config as config_module

    config_module.NOTIFY, saved = told.append, config_module.NOTIFY
    try:
        cfg = load_config(root.path)
        again = load_config(root.path)
    finally:
        config_module.NOTIFY = saved
    # every value reads as it will after the move, from memory
    assert {key: cfg.get(key) for key in OLD_VALUES} == OLD_VALUES and again.get("update.approval") == "required"
    assert tree_state(root.path) == before  # no file written, touched or created (no lock file either)
    assert len(told) == 1 and "config migrate" in told[0] and "update.approval" in told[0]


def test_a_command_on_an_older_root_says_so_in_one_line_and_takes_no_lock(root, cli):
    import subprocess
    import sys

    old_root(root)
    rp = str(root.path)
    files = (root.path / CONFIG_FILE, root.path / LOCAL_FILE, root.path / ".git" / "info" / "exclude")
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) if p.exists() else None for p in files}
    lock = root.path / ".runtime" / "config.lock"
    lock.parent.mkdir(exist_ok=True)
    # another process holds the config lock all along: a read that wanted it would wait, then fail
    hold = ("import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        values = {}
        for key in OLD_VALUES:
            r = cli("--headless", "config", "get", key, "--root", rp, "--json")
            assert r.code == 0, r.stderr
            values[key] = r.json()["value"]
            told = [line for line in r.stderr.splitlines() if line.strip()]
            assert len(told) == 1 and "older layout" in told[0], r.stderr
            assert f"rmtui --headless config migrate --root {rp}" in told[0]
        st = cli("--headless", "status", "--root", rp)
        assert st.code == 0, st.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert values == OLD_VALUES
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) if p.exists() else None for p in files} == before


def test_config_migrate_moves_the_keys_and_says_what_it_moved(root, cli):
    write_original(root, OLD_RMTUI_TOML, commit=False)  # untracked, as in a root made today: rewritten in place
    rp = str(root.path)
    r = cli("--headless", "config", "migrate", "--root", rp)
    assert r.code == 0, r.stderr
    assert f"moved rmtui-only settings from rightmemory.toml to rmtui.toml: {', '.join(MOVED)}" in r.stdout
    assert "insight.threshold renamed to insight.watch.trigger_points" in r.stdout

    shared, local = root.path / CONFIG_FILE, root.path / LOCAL_FILE
    assert only_original_keys(shared) == set()
    text, local_text = shared.read_text(encoding="utf-8"), local.read_text(encoding="utf-8")
    # comments travel with their keys; the others stay
    assert "# Largest evidence text accepted by submit, in bytes.\nmax_evidence_bytes = 4096" in local_text
    assert "# How many ranked items retrieve returns.\ntop_k = 4" in local_text
    assert "# Sentence-transformers model name." in local_text
    assert "# A batch forms when this many candidates are ready ...\ntarget_batch_candidates = 7" in text
    assert "approval" not in text and "[embedding]" not in text
    # no setting lost, and nothing left to say
    for key, value in OLD_VALUES.items():
        got = cli("--headless", "config", "get", key, "--root", rp, "--json")
        assert got.json()["value"] == value and got.stderr.strip() == "", (key, got.stderr)
    assert git.Repo(root.path).ignored(LOCAL_FILE) == [LOCAL_FILE]
    j = cli("--headless", "config", "migrate", "--root", rp, "--json")
    assert j.code == 0 and j.json()["moved"] == [] and j.json()["renamed"] == []


def test_config_migrate_of_a_tracked_file_lands_one_commit(root, cli):
    head = old_root(root)  # an older root tracks rightmemory.toml
    rp = str(root.path)
    r = cli("--headless", "config", "migrate", "--root", rp, "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["moved"] == MOVED and out["renamed"] == [{"from": "insight.threshold",
                                                         "to": "insight.watch.trigger_points"}]
    repo = git.Repo(root.path)
    assert repo.head.commit.parents[0].hexsha == head and repo.head.commit.hexsha.startswith(out["landed_commit"][:10])
    assert repo.head.commit.message.startswith("config: move rmtui-only settings")
    assert not repo.is_dirty() and repo.ignored(LOCAL_FILE) == [LOCAL_FILE]
    committed = repo.git.show(f"HEAD:{CONFIG_FILE}")
    assert "approval" not in committed and "[embedding]" not in committed
    cfg = load_config(root.path)
    assert {key: cfg.get(key) for key in OLD_VALUES} == OLD_VALUES and cfg.notices == []


def test_init_force_migrates_and_says_what_moved(root, cli):
    old_root(root)
    r = cli("--headless", "init", "--force", str(root.path))
    assert r.code == 0, r.stderr
    assert f"moved rmtui-only settings from rightmemory.toml to rmtui.toml: {', '.join(MOVED)}" in r.stdout
    assert only_original_keys(root.path / CONFIG_FILE) == set()
    assert load_config(root.path).get("update.approval") == "required"
    j = cli("--headless", "init", "--force", str(root.path), "--json")
    assert j.code == 0 and j.json()["config_migration"] == []  # nothing left to move


def test_migration_writes_nothing_when_the_file_also_has_an_unknown_key(root, cli):
    text = OLD_RMTUI_TOML + "\n[debug]\ntrac = true\n"
    write_original(root, text)
    r = submit(cli, root)
    assert r.code == 2 and "unknown key 'debug.trac'" in r.stderr and "'debug.trace'" in r.stderr
    r = cli("--headless", "config", "migrate", "--root", str(root.path))
    assert r.code == 2 and "unknown key 'debug.trac'" in r.stderr
    assert (root.path / CONFIG_FILE).read_text(encoding="utf-8") == text and not (root.path / LOCAL_FILE).exists()


def test_set_on_an_older_root_asks_for_the_migration_first(root):
    write_original(root, OLD_RMTUI_TOML, commit=False)
    before = (root.path / CONFIG_FILE).read_bytes()
    with pytest.raises(UsageError, match="older layout.*config migrate"):
        set_config_value(root.path, "update.approval", "auto")
    assert (root.path / CONFIG_FILE).read_bytes() == before and not (root.path / LOCAL_FILE).exists()


# -- executors in the original's order ---------------------------------------------------------------------

def test_executor_inheritance_follows_the_originals_order(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    write_original(root, "[pruner.model]\nmodel_id = \"openai:gpt-5\"\n[dreamer.agent_cli]\nprovider = \"claude\"\n"
                         "[reviewer.model]\nmodel_id = \"openai:gpt-5-mini\"\n", commit=False)
    cfg = load_config(root.path)
    for role in ("update", "historian", "insight", "sync-reconciler", "update-correction"):
        r = resolve_role_executor(cfg, role)
        assert (r.source_role, r.kind, r.settings.provider) == ("dreamer", "agent_cli", "claude"), role
    assert resolve_role_executor(cfg, "pruner").settings.api_key == "from-env"
    assert resolve_role_executor(cfg, "retrieve") is None  # retrieve never inherits
    assert ignored_keys(cfg) == ["reviewer.model"]  # dreamer's executor is in use

    write_original(root, "[agent_cli]\nprovider = \"codex\"\n[update.model]\nmodel_id = \"openai:gpt-5\"\n"
                         "api_key = \"sk-file\"\n", commit=False)
    cfg = load_config(root.path)
    assert resolve_role_executor(cfg, "update").settings.api_key == "sk-file"  # the file's key wins
    assert resolve_role_executor(cfg, "historian").source_role == "update"
    r = resolve_role_executor(cfg, "retrieve")
    assert (r.source_role, r.settings.provider, r.settings.model) == ("agent_cli", "codex", "")
    # a role's [agent_cli] model without a provider runs on the global provider
    write_original(root, "[agent_cli]\nprovider = \"claude\"\n[historian.agent_cli]\nmodel = \"opus\"\n", commit=False)
    r = resolve_role_executor(load_config(root.path), "historian")
    assert (r.source_role, r.settings.provider, r.settings.model) == ("historian", "claude", "opus")


def test_with_only_update_configured_every_role_but_retrieve_runs_on_it(root, cli):
    from rmtui.engine.memory.role_table import ROLES

    write_original(root, "[update.model]\nmodel_id = \"openai:gpt-5\"\n", commit=False)
    cfg = load_config(root.path)
    sources = {role: getattr(resolve_role_executor(cfg, role), "source_role", None) for role in ROLES}
    assert sources == {role: (None if role == "retrieve" else "update") for role in ROLES}
    # the one exception says why, as the README does (retrieve stays on the embedding backend)
    r = cli("chat", "--role", "retrieve", "--root", str(root.path), input="")
    assert r.code == 4 and "never uses another role's model" in r.stderr, (r.code, r.stderr)


# -- retrieval counts and rerank through [retrieve.embedding] -----------------------------------------------

class Recording:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.reranked: list[int] = []

    def info(self):
        return self.inner.info()

    def embed(self, texts, kind):
        return self.inner.embed(texts, kind)

    def rerank(self, query, documents):
        self.reranked.append(len(documents))
        return self.inner.rerank(query, documents)


def test_service_counts_drive_rerank_and_result_count(root, backend):
    from rmtui.engine.retrieval.retrieve import retrieve

    write_small_root(root)
    text = ORIGINAL_TOML.format(url="http://127.0.0.1:9", token="t")
    write_original(root, text, commit=False)
    rec = Recording(backend)  # the tiny cross-encoder: its /info reports a reranker
    out = retrieve(root, "s", "billing database owner", backend=rec)
    assert rec.reranked == [3] and len(out.results) == 2  # candidate_count reranked, result_count returned
    assert math.isclose(float(load_config(root.path).get("retrieve.embedding.timeout_seconds")), 30.0)
    write_original(root, text.replace("candidate_count = 3", "candidate_count = 500"), commit=False)
    with pytest.raises(UsageError, match="candidate_count = 500 exceeds"):
        retrieve(root, "s2", "billing database owner", backend=rec)


# -- booleans, integers and the provider, checked as the original checks them ----------------------------

@pytest.mark.parametrize("text", [
    "[agent_cli]\nprovider = \" codex \"\n",
    "[update.agent_cli]\nprovider = \"\\tclaude\"\nmodel = \" opus \"\n",
    "[update.agent_cli]\nprovider = \"Codex\"\n",
    "[agent_cli]\nprovider = \"co dex\"\n",
    "[agent_cli]\nprovider = \"   \"\n",
    "[review]\nidle_seconds = true\n",
    "[review]\nsince_days = true\n",
    "[review]\nsince_days = false\n",
    "[review]\nbatch_size = true\n",
    "[sync]\nstale_pull_after_hours = true\n",
    "[sync]\nenabled = 1\n",
    "[sync]\nenabled = true\n",
    "[debug]\ntrace = \"true\"\n",
    "[debug]\ntrace = false\n",
])
def test_booleans_and_provider_as_the_original_checks_them(root, text):
    from compat_checker import original_config_verdict

    write_original(root, text, commit=False)
    refused = original_config_verdict(text)
    if refused is None:
        assert_roles_as_the_original(root, text)
    else:
        with pytest.raises(UsageError) as err:
            load_config(root.path)
        assert repr(refused) in err.value.message


#: rmtui's roles that the original has too (update-correction is rmtui's own).
SHARED_ROLES = ("retrieve", "update", "pruner", "insight", "historian", "sync-reconciler")


def assert_roles_as_the_original(root, text: str) -> None:
    """Every shared role resolves as the original's loader loads it: an executor, nothing
    configured, or a refusal naming the table it runs on."""
    from compat_checker import original_role_verdict

    cfg = load_config(root.path)  # the file itself loads, as the original's does
    for role in SHARED_ROLES:
        verdict = original_role_verdict(text, role)
        if verdict.startswith("refused: "):
            with pytest.raises(UsageError) as err:
                resolve_role_executor(cfg, role)
            table = verdict.removeprefix("refused: ").strip("[]").split(".")[0]
            assert f"[{table}" in err.value.message or f"'{table}." in err.value.message, (role, err.value.message)
        else:
            got = resolve_role_executor(cfg, role)
            assert (got is None) == (verdict == "none"), (role, verdict, got)


BOTH = "[insight.model]\nmodel_id = \"openai:gpt-5\"\n[insight.agent_cli]\nprovider = \"claude\"\n"


@pytest.mark.parametrize("text", [
    BOTH,                                                               # every role but retrieve lands on insight
    BOTH + "[update.model]\nmodel_id = \"openai:gpt-5\"\n",              # only insight itself is refused
    BOTH + "[dreamer.agent_cli]\nprovider = \"codex\"\n",                # dreamer comes before insight
    BOTH + "[pruner.model]\nmodel_id = \"openai:gpt-5\"\n[agent_cli]\nprovider = \"codex\"\n",
    "[pruner.model]\napi_base = \"http://x\"\n[update.agent_cli]\nprovider = \"claude\"\n",  # pruner alone
    "[historian.agent_cli]\nmodel = \"opus\"\n[update.model]\nmodel_id = \"openai:gpt-5\"\n",  # no provider anywhere
    "[agent_cli]\nprovider = \"aider\"\n[update.model]\nmodel_id = \"openai:gpt-5\"\n",  # only the CLI path
    "[agent_cli]\nprovider = \"codex\"\nmodle = 1\n[update.model]\nmodel_id = \"openai:gpt-5\"\n",
])
def test_a_broken_executor_table_refuses_only_the_roles_that_run_on_it(root, text):
    write_original(root, text, commit=False)
    assert_roles_as_the_original(root, text)


def test_status_and_config_get_work_with_both_insight_executors_set(root, cli):
    write_original(root, BOTH + "[update.model]\nmodel_id = \"openai:gpt-5\"\n", commit=False)
    rp = str(root.path)
    st = cli("--headless", "status", "--root", rp, "--json")
    assert st.code == 0, st.stderr
    assert any("[insight.model] and [insight.agent_cli] are both set" in w for w in st.json()["config"]["warnings"])
    text = cli("--headless", "status", "--root", rp)
    assert text.code == 0 and "warning: " in text.stdout and "[insight.agent_cli]" in text.stdout
    got = cli("--headless", "config", "get", "insight.agent_cli.provider", "--root", rp, "--json")
    assert got.code == 0 and got.json()["value"] == "claude"
    # the role that runs on the table is refused when it runs, with the original's reason
    r = cli("--headless", "insight", "run", "--force", "--root", rp)
    assert r.code == 2 and "[insight.model] and [insight.agent_cli] are both set" in r.stderr, (r.code, r.stderr)


def test_a_provider_with_blanks_runs_without_them(root):
    write_original(root, "[agent_cli]\nprovider = \" codex \"\n[historian.agent_cli]\nprovider = \"claude \"\n"
                         "model = \" opus\"\n", commit=False)
    cfg = load_config(root.path)
    r = resolve_role_executor(cfg, "historian")
    assert (r.settings.provider, r.settings.model) == ("claude", "opus")
    assert resolve_role_executor(cfg, "retrieve").settings.provider == "codex"

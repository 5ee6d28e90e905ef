"""The text models read never contradicts the program (docs/memory-doctrine.md, "Contract").

Every role prompt (as the program builds it, with its task turn), every task header a host
is handed and every installed skill is read here, and each command, flag, tool name,
selection example, source-id form and file name it mentions is checked against the program
itself: the real argparse parser, the role's tool table, the retrieval renderer, the role's
commit paths and the native retrieve context. A rule written in a prompt that the program
refuses makes a model fail; these tests make such text fail first.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmtui.cli import build_parser
from rmtui.engine.cycles import corrections, historian, hosted, insight, pruner
from rmtui.engine.host import assistant
from rmtui.engine.host.skills import install_skills
from rmtui.engine.memory import role_table
from rmtui.engine.memory.roots import init_root
from rmtui.engine.retrieval import agent_retrieve
from rmtui.engine.retrieval.corpus import load_corpus
from rmtui.engine.retrieval.render import resolve_selection
from rmtui.engine.roles.prompts import role_instructions
from rmtui.engine.roles.tools import RoleTools
from rmtui.engine.roles.update_driver import update_prompt
from rmtui.engine.sync.repair import repair_prompt

EXTRA_TOOLS = {"retrieve": {"submit_selection"}}  # the model retrieve role's terminal tool


def _role_tools(role: str, where: Path) -> set[str]:
    return {s.name for s in RoleTools(where, role).specs()} | EXTRA_TOOLS.get(role, set())


def _all_tools(where: Path) -> set[str]:
    return set().union(*(_role_tools(r, where) for r in role_table.ROLES))


@pytest.fixture
def texts(tmp_path):
    """Every text a model or a host reads: key -> (role or None, text)."""
    root = init_root(tmp_path / "root")
    (root.path / "corrections.md").write_text(
        "# Corrections\n\n## Lint tool\n\n### Candidate\nx\n\n### Proposed edit\ny\n\n### Accepted edit\nz\n",
        encoding="utf-8")
    wt = str(root.path)
    ev = [SimpleNamespace(uid="ev-1", session="s1", created_at=0.0, text="The project lints with ruff.")]
    receipt = SimpleNamespace(operation_id="op-1", batch_id="b-1", landed_commit="0" * 40, changed_paths=["MEMORY.md"])
    status = pruner.PruneStatus(due=True, memory_commits_since_prune=3, generation_commits=3,
                                revival_grace_checkpoints=2, head="0" * 40, last_prune_commit=None,
                                last_prune_subject=None, boundary=None, revival_grace=[], pursuit_referenced=[],
                                last_outcome=None, failures=0, backoff=None)
    task_prompts = {
        "update": update_prompt("b-1", ev, wt, True),
        # a LONG landed diff: the task text then says how to read the rest
        "update-correction": corrections.correction_prompt(
            wt, receipt, corrections.landing_text("diff --git a/MEMORY.md\n" + "+x\n" * corrections.MAX_DIFF_CHARS,
                                                  "0" * 40), [("ev-1", "x")], "we lint with ruff", []),
        "pruner": pruner.prune_prompt(wt, status, {"keep"}, {"back": (1, 2)}),
        "insight": insight.insight_prompt(wt, "insight_logs/2026-01-01-000000.md", [], 3.0),
        "historian": historian.historian_prompt("when did we adopt ruff?", "0" * 40, []),
        "sync-reconciler": repair_prompt("origin/main", ["MEMORY.md"], []),
    }
    corpus = load_corpus(root.path)
    task_prompts["retrieve"] = agent_retrieve.build_context(root, "s1", "how do we lint?", corpus, None, {}, {}, None)
    out: dict[str, tuple[str | None, str]] = {}
    for role in role_table.ROLES:
        preamble = historian.PREAMBLE if role == "historian" else ""
        out[f"model:{role}"] = (role, preamble + role_instructions(role) + "\n\n" + task_prompts[role])
    op = SimpleNamespace(id="assistant-20260101T000000Z-0123abcd", worktree=wt, base_commit="0" * 40)
    out["host:update"] = ("update", assistant.update_instructions(root, op))
    for role in hosted.HOSTED_ROLES:
        task = hosted.HostTask(f"{hosted.kind_of(role)}-20260101T000000Z-0123abcd", role, hosted.kind_of(role), wt,
                               "0" * 40, task_prompts[role], {}, {})
        out[f"host:{role}"] = (role, assistant._instructions(root, task))
    ctx = assistant.context(root, "s1")
    out["host:retrieve"] = ("retrieve-host", Path(ctx.instructions).read_text(encoding="utf-8"))
    for skill in install_skills(tmp_path / "skills"):
        out[f"skill:{skill['name']}"] = (None, (Path(skill["path"]) / "SKILL.md").read_text(encoding="utf-8"))
    return SimpleNamespace(root=root, texts=out, context=ctx, tasks=task_prompts)


def _report(problems: list[str]) -> None:
    assert not problems, "text contradicts the program:\n" + "\n".join(problems)


# -- commands and flags: the real parser -----------------------------------------------------

_CODE_SPAN = re.compile(r"`([^`]+)`")
_COMMAND = re.compile(r"rmtui --headless ([^`\n]*)")
_ALTERNATIVES = re.compile(r"^[a-z][a-z-]*(\|[a-z][a-z-]*)+$")


def mentioned_commands(text: str) -> list[str]:
    """Every ``rmtui --headless …`` a text shows: in code spans and in code blocks."""
    found: list[str] = []
    for span in _CODE_SPAN.findall(text):
        found += _COMMAND.findall(span.replace("\n", " "))
    in_block = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_block = not in_block
        if in_block or line.startswith("    "):
            found += [c for c in _COMMAND.findall(line) if "`" not in line]
    return [c.split(" # ")[0].strip() for c in found]


def _argv_variants(command: str) -> list[list[str]]:
    tokens = shlex.split(re.sub(r"<[^>]*>", "X", command))
    tokens = [t.strip("[]") for t in tokens if t.strip("[]") and t not in ("...", "…")]
    variants: list[list[str]] = [[]]
    for t in tokens:
        options = t.split("|") if _ALTERNATIVES.match(t) else [t]
        variants = [v + [o] for v in variants for o in options]
    return variants


def parse(argv: list[str]):
    """The real parser's verdict: the parsed namespace, or the usage error it prints."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return build_parser(["--headless", *argv]).parse_args(["--headless", *argv])
        except SystemExit:
            return err.getvalue().strip().splitlines()[-1]


def _is_prefix(argv: list[str]) -> bool:
    """``rmtui --headless update ...``: the words name an existing command (a prefix mention)."""
    parser = build_parser(argv)
    for word in argv:
        subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs or word not in subs[0].choices:
            return False
        parser = subs[0].choices[word]
    return True


def test_every_command_a_text_shows_parses_with_the_real_parser(texts):
    problems = []
    for key, (_, text) in texts.texts.items():
        for command in mentioned_commands(text):
            for argv in _argv_variants(command):
                if command.rstrip().endswith(("...", "…")):
                    if not _is_prefix(argv):
                        problems.append(f"{key}: `rmtui --headless {command}` names no command")
                    continue
                verdict = parse(argv)
                if isinstance(verdict, str):
                    problems.append(f"{key}: `rmtui --headless {' '.join(argv)}`: {verdict}")
    _report(problems)


_JSON_CLAIM = re.compile(r"(?i)\b(every|all)\b[^.\n]{0,40}\bcommands?\b[^.]{0,60}\bprints? JSON")


def test_a_text_claiming_json_output_shows_only_commands_that_print_it(texts):
    """The commands ``rmtui.commands.assistant`` registers always answer JSON; the others only with ``--json``."""
    from rmtui.commands import COMMAND_OWNERS

    always = {c for c, owners in COMMAND_OWNERS.items() if owners == ("rmtui.commands.assistant",)}
    problems = []
    for key, (_, text) in texts.texts.items():
        if not _JSON_CLAIM.search(text):
            continue
        for command in mentioned_commands(text):
            argv = _argv_variants(command)[0]
            ns = parse(argv)
            if isinstance(ns, str) or "--json" in argv:
                continue
            if ns.command not in always:
                problems.append(f"{key}: says every command prints JSON, but `rmtui --headless {command}` "
                                "prints text without --json")
    _report(problems)


# -- tool names: the role's tool table -------------------------------------------------------

def named_tools(text: str, known: set[str]) -> set[str]:
    """Tools a text names: ``snake_case`` names anywhere, one-word names in code spans."""
    spans = set(_CODE_SPAN.findall(text))
    return {t for t in known if ("_" in t and re.search(rf"(?<![\w./-]){t}(?![\w-])", text)) or t in spans}


def test_a_model_prompt_names_only_tools_its_role_has(texts):
    problems = []
    everything = _all_tools(texts.root.path)
    for key, (role, text) in texts.texts.items():
        if not key.startswith("model:"):
            continue
        extra = named_tools(text, everything) - _role_tools(role, texts.root.path)
        if extra:
            problems.append(f"{key}: names {', '.join(sorted(extra))}, which the {role} role does not have")
    _report(problems)


_OWN_FILE_TOOLS = re.compile(r"use your own: (.*?) are your file tools")


def test_a_host_task_maps_every_model_tool_it_names_and_names_only_the_roles(texts):
    """A host child has its own tools: each model tool a task text names (``outline`` and
    ``discard`` as much as ``git_add``) is mapped in the header to the host's equivalent or
    to its own file tools, and it is one the role has (the native retrieve child has none)."""
    problems = []
    everything = _all_tools(texts.root.path)
    for key, (role, text) in texts.texts.items():
        if not key.startswith("host:"):
            continue
        named = named_tools(text, everything)
        own = set() if role == "retrieve-host" else _role_tools(role, texts.root.path)
        for tool in sorted(named - own):
            problems.append(f"{key}: names `{tool}`, which the {role} child does not have")
        files = _OWN_FILE_TOOLS.search(text)
        for tool in sorted(named & own):
            if not re.search(rf"`{tool}` is `", text) and not (files and f"`{tool}`" in files.group(1)):
                problems.append(f"{key}: names `{tool}` but the header does not say what it is for a host")
    _report(problems)


def test_the_host_mapping_runs_what_the_model_tool_answers(texts, tmp_path):
    """``outline`` maps to a command that prints what the role's tool prints; every mapped
    rmtui command parses (``test_every_command_a_text_shows_parses_with_the_real_parser``)."""
    import subprocess
    import sys

    wt = texts.root.path
    (wt / "MEMORY.md").write_text("# Memory\n\n## Build {#build}\n\n- `uv` Use uv → [rel:build]\n", encoding="utf-8")
    for role in ("update", "insight", "pruner", "sync-reconciler"):
        mapping = assistant.tool_mapping(role, str(wt))
        argv = re.search(r"`outline` is `[^`]*--headless (outline [^`]*)`", mapping).group(1).split()
        out = subprocess.run([sys.executable, "-m", "rmtui", "--headless", *argv], capture_output=True, text=True,
                             check=True).stdout
        tools = RoleTools(wt, role)
        assert out.rstrip("\n") == tools.outline({}), role
        tools.repo.close()
    assert "`discard` is `git restore" in assistant.tool_mapping("sync-reconciler", str(wt))


# -- selections and source ids: the renderer -------------------------------------------------

def selection_examples(text: str) -> list[dict]:
    """JSON objects a text shows as a selection (they carry ``ids``, ``sources`` or ``recent_candidates``)."""
    found = []
    fenced = re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL)
    unfenced = re.sub(r"```[^\n]*\n.*?```", "", text, flags=re.DOTALL)
    for block in fenced + re.findall(r"((?:\n    .*)+)", unfenced):
        raw = "\n".join(line[4:] if line.startswith("    ") else line for line in block.splitlines()).strip()
        if not raw.startswith("{") or '"source_id"' not in raw and '"recent_candidates"' not in raw:
            continue
        try:
            found.append(json.loads(raw))
        except ValueError:
            found.append({"not JSON": raw})
    return found


def _root_holding(tmp: Path, selection: dict):
    """A root in which everything the selection names exists, in the form its id says."""
    from rmtui.engine.memory.graph import ID_RE

    root = init_root(tmp)
    memory = ["# Memory", "", "## Example {#example-root}", ""]
    for ident in selection.get("ids", []):
        if isinstance(ident, str) and ID_RE.match(ident):
            memory.append(f"- `{ident}` an item named by the example → []")
    for src in selection.get("sources", []):
        sid = src.get("source_id", "") if isinstance(src, dict) else ""
        m = re.match(r"^(M|S)#([A-Za-z0-9_.-]+)$", sid)
        if m:
            kind, ident = m.groups()
            memory += ["", f"### Example {kind} {{{kind}#{ident}}}", ""]
            name = f"MEMORY_{ident}.md" if kind == "M" else f"MEMORY_SKILL_{ident}.md"
            (root.path / name).write_text("".join(f"line {n}\n" for n in range(1, 61)), encoding="utf-8")
    (root.path / "MEMORY.md").write_text("\n".join(memory) + "\n", encoding="utf-8")
    return root


def test_every_selection_a_text_shows_is_one_the_renderer_accepts(texts, tmp_path):
    """Whole example selections, and every ``"source_id"`` a text shows (each in its own root)."""
    from rmtui.engine.errors import UsageError

    problems = []
    n = 0
    for key, (_, text) in texts.texts.items():
        sources = [{"source_id": sid, **({} if sid.startswith("S#") else {"ranges": [{"start": 1, "end": 2}]})}
                   for sid in (re.sub(r"<[^>]*>", "example", t) for t in re.findall(r'"source_id": "([^"]*)"', text))]
        for sel in selection_examples(text) + [{"sources": [src]} for src in sources]:
            n += 1
            root = _root_holding(tmp_path / f"sel{n}", sel)
            recent = {u: ("session s1", "evidence") for u in sel.get("recent_candidates", []) if isinstance(u, str)}
            if "not JSON" in sel:
                problems.append(f"{key}: the example selection is not literal JSON: {sel['not JSON'][:80]}")
                continue
            try:
                resolve_selection(load_corpus(root.path), sel, recent=recent)
            except UsageError as exc:
                problems.append(f"{key}: the renderer refuses the example selection: {exc.message}")
    _report(problems)


_WHOLE = re.compile(r"(?i)\bwhole\b|\bnever\b|\bno (ids or )?(line )?ranges\b|\bnot (by )?(line )?ranges\b")


def test_no_text_offers_line_ranges_of_a_skill(texts):
    """An ``S#`` skill is selected whole; the renderer refuses ids or ranges for it."""
    problems = []
    for key, (_, text) in texts.texts.items():
        for sentence in re.split(r"(?<=[.;:])\s+|\n\s*\n", text):
            if "S#" in sentence and "range" in sentence and not _WHOLE.search(sentence):
                problems.append(f"{key}: offers line ranges for an S# skill: {' '.join(sentence.split())[:160]}")
    _report(problems)


# -- files: the role's paths ----------------------------------------------------------------

def _named(pattern: str, text: str) -> bool:
    """A commit path class is named: the pattern itself, or its folder (``update_queue/``)."""
    return pattern in text or ("/" in pattern and pattern.split("/", 1)[0] + "/" in text)


def test_a_writer_prompt_names_every_path_its_role_may_commit(texts):
    problems = []
    for role in role_table.WRITER_ROLES:
        text = texts.texts[f"model:{role}"][1]
        missing = [p for p in role_table.role_spec(role).commits if not _named(p, text)]
        if missing:
            problems.append(f"model:{role}: never names {', '.join(missing)}, which the role may commit")
    _report(problems)


def test_the_native_retrieve_context_lists_only_files_the_retrieve_role_reads(texts):
    root = texts.root.path
    unreadable = [s for s in texts.context.sources
                  if not role_table.may_read("retrieve", Path(s).relative_to(root).as_posix())]
    assert not unreadable, f"assistant context hands the retrieve child files it may not read: {unreadable}"


# -- what a role is and does ----------------------------------------------------------------

def test_no_text_both_commits_once_and_allows_several_commits(texts):
    problems = [f"{key}: says commit once and allows one or more commits"
                for key, (_, text) in texts.texts.items()
                if re.search(r"(?i)commit`? once", text) and re.search(r"(?i)one or more commits", text)]
    _report(problems)


def test_a_reference_repair_role_is_never_offered_a_pursuit_fix(texts):
    """Update and its correction may touch Pursuit only to drop edges to deleted Memory items."""
    problems = []
    for key, (role, text) in texts.texts.items():
        if role in role_table.REFERENCE_REPAIR_ONLY and re.search(r"(?i)\b(Memory or Pursuit|Pursuit) (fix|correction)",
                                                                   text):
            problems.append(f"{key}: offers a Pursuit fix, but the {role} role may only repair references there")
    _report(problems)


def test_the_correction_role_is_told_what_it_runs_on(texts):
    """It runs on a landed Update and a person's comment, and answers one of the result statuses."""
    problems = []
    for key in ("model:update-correction", "host:update-correction"):
        text = texts.texts[key][1]
        instructions = role_instructions("update-correction")
        if re.search(r"(?i)\bthis batch\b", instructions):
            problems.append(f"{key}: describes a batch of candidates; the role runs on a landed Update")
        if "comment" not in instructions:
            problems.append(f"{key}: never mentions the person's comment")
        missing = [s for s in corrections.STATUSES if s not in instructions]
        if missing:
            problems.append(f"{key}: never explains the result statuses {', '.join(missing)}")
        if "landed" not in text:
            problems.append(f"{key}: never says the Update it corrects has landed")
    _report(problems)


# -- the doctrine: written once, included when built ------------------------------------------

def test_every_doctrine_include_resolves_and_no_text_repeats_a_rule(texts, tmp_path):
    from rmtui.engine.errors import UnavailableError
    from rmtui.engine.roles.prompts import INCLUDE_RE, doctrine_sections, expand_doctrine
    from rmtui.resources import data_dir

    sections = doctrine_sections()
    for key, (_, text) in texts.texts.items():
        assert "<!-- doctrine:" not in text, f"{key}: an include was left unexpanded"
    raw = {p.name: p.read_text(encoding="utf-8") for p in data_dir("prompts").glob("*.md")}
    raw |= {f"{p.parent.name}/SKILL.md": p.read_text(encoding="utf-8") for p in data_dir("skills").glob("*/SKILL.md")}
    included = {name for text in raw.values() for name in INCLUDE_RE.findall(text)}
    assert set(sections) - included == {"contract"}, "a doctrine section no prompt or skill includes"
    for name, text in raw.items():  # a rule lives in the doctrine only: no sentence of it is copied
        for section, body in sections.items():
            for sentence in re.split(r"(?<=[.:;])\s+", " ".join(body.split())):
                if len(sentence) > 60:
                    assert sentence not in " ".join(text.split()), f"{name} repeats doctrine ({section}): {sentence}"
    with pytest.raises(UnavailableError, match="no-such-rule"):
        expand_doctrine("<!-- doctrine: no-such-rule -->\n", "x.md")


def test_installed_skills_carry_the_doctrine_they_include(texts):
    from rmtui.engine.roles.prompts import doctrine_sections

    stale = doctrine_sections()["stale-memory"]
    assert stale in texts.texts["skill:rmtui-assistant"][1]
    assert doctrine_sections()["maintenance"] in texts.texts["skill:maintain-rmtui"][1]


_WRITE_VERB = re.compile(r"(?i)\b(create|creates|edit|edits|write|writes|commit|commits|remove|removes)\b")
_NOT_WRITE = re.compile(r"(?i)\b(never|not|no|nothing|leave|leaves|only read|alone|refused|refuses|read them)\b")
_FILE = re.compile(r"`([A-Za-z0-9_.*<>/-]+\.(?:md|toml|json))`")


def _concrete(pattern: str) -> str:
    """A path a file pattern names (``MEMORY_*.md`` -> ``MEMORY_x.md``, placeholders filled)."""
    path = re.sub(r"<[^>]*>", "x", pattern).replace("*", "x")
    return re.sub(r"YYYY-MM-DD-HHMMSS", "2026-01-01-000000", path)


def test_a_writer_is_told_to_write_only_paths_its_role_may_commit(texts):
    """A sentence that tells a writer role to create, edit or commit a file names only files
    the role table lets it commit (sentences that forbid or only read are skipped)."""
    problems = []
    for role in role_table.WRITER_ROLES:
        key = f"model:{role}"
        own = role_instructions(role).split("\n---\n")[0]  # the role's text, then its task turn (not the schema)
        body = re.sub(r"```.*?```", "", own + "\n\n" + texts.tasks[role], flags=re.DOTALL)
        for sentence in re.split(r"(?<=[.;])\s+|\n\s*\n|\n(?=\s*[-0-9])", body):
            if not _WRITE_VERB.search(sentence) or _NOT_WRITE.search(sentence):
                continue
            for name in _FILE.findall(sentence):
                if re.search(rf"(?i)\bread\s+`{re.escape(name)}`", sentence):
                    continue  # read here, not written
                if not role_table.may_write(role, _concrete(name)):
                    problems.append(f"{key}: tells the role to write `{name}`, which it may not commit: "
                                    f"{' '.join(sentence.split())[:140]}")
    _report(problems)


_FORBID = re.compile(r"(?i)\b(leave|never (edit|touch|write)|not yours)\b")
_BUT = re.compile(r"(?i)\b(except|only to|only drop|unless)\b")


def test_a_writer_is_never_allowed_a_path_its_text_forbids(texts):
    """A sentence that tells a writer to leave a file alone names only files the role table
    refuses it: admission then catches what the text forbids."""
    problems = []
    for role in role_table.WRITER_ROLES:
        own = role_instructions(role).split("\n---\n")[0]
        body = re.sub(r"```.*?```", "", own + "\n\n" + texts.tasks[role], flags=re.DOTALL)
        for sentence in re.split(r"(?<=[.;])\s+|\n\s*\n|\n(?=\s*[-0-9])", body):
            if not _FORBID.search(sentence) or _BUT.search(sentence):
                continue
            for name in _FILE.findall(sentence):
                if role_table.may_write(role, _concrete(name)):
                    problems.append(f"model:{role}: forbids `{name}`, which the role table lets it commit: "
                                    f"{' '.join(sentence.split())[:140]}")
    _report(problems)


# -- correction collections: reachable as the text says ---------------------------------------

def test_a_correction_collection_written_as_the_doctrine_says_is_valid_and_retrievable(texts, tmp_path):
    """The doctrine shows how a collection is linked; a root built that way validates without a
    warning and a selection of the collection's ``M#`` source renders its entry. The retrieve
    texts name the collections."""
    from rmtui.engine.memory.validation import COLLECTION_FILES, validate_root
    from rmtui.engine.retrieval.render import render
    from rmtui.engine.roles.prompts import doctrine_sections

    blocks = dict(re.findall(r"```([^\n`]+)\n(.*?)```", doctrine_sections()["agent-corrections"], re.DOTALL))
    assert "MEMORY.md" in blocks, "the doctrine never shows how a correction collection is linked"
    root = init_root(tmp_path / "linked")
    (root.path / "MEMORY.md").write_text("# Memory\n\n" + blocks["MEMORY.md"], encoding="utf-8")
    for name in COLLECTION_FILES:
        assert name in texts.texts["model:update"][1] and name in texts.texts["host:retrieve"][1], name
        (root.path / name).write_text(f"### Pattern of {name}\n\nAsked x; did y; rejected z; accepted w.\n",
                                      encoding="utf-8")
    report = validate_root(root.path)
    assert report.ok and not report.warnings, [str(i) for i in report.issues]
    corpus = load_corpus(root.path)
    for name in COLLECTION_FILES:
        sid = "M#" + name.removeprefix("MEMORY_").removesuffix(".md")
        assert sid in texts.texts["model:retrieve"][1], f"the retrieve text never names {sid}"
        units = resolve_selection(corpus, {"sources": [{"source_id": sid, "ranges": [{"start": 1, "end": 3}]}]})
        assert f"Pattern of {name}" in render(corpus, units, max_chars=10_000).text


def test_the_fixed_collection_headings_are_held_as_the_texts_say(texts, tmp_path):
    """The doctrine: once linked, a collection's heading may move within ``MEMORY.md`` and its
    title change, but Update, the correction round and the pruner may not remove it, change
    its anchor or move it to another file; admission refuses that by the rule the text names,
    for exactly those roles (not the sync-reconciler, not a person's maintenance)."""
    from rmtui.engine.memory.graph import load_graph
    from rmtui.engine.roles.prompts import doctrine_sections
    from rmtui.engine.writes.admission import FIXED_HEADING_ROLES, AdmissionRefused, check_fixed_headings

    section = " ".join(doctrine_sections()["agent-corrections"].split())
    claim = re.search(r"move it within `MEMORY.md` or reword its title, but never remove it, change its `\{M#…\}` "
                      r"anchor or move it to another file: admission refuses such a commit from Update, the "
                      r"correction round or the pruner \(`([a-z-]+)`\)", section)
    assert claim, "the doctrine no longer says what is held of a fixed collection heading"
    rule = claim.group(1)
    held = {r for r in role_table.WRITER_ROLES if role_table.may_write(r, "MEMORY.md")} - {"sync-reconciler"}
    assert held == {"update", "update-correction", "pruner"} and held <= FIXED_HEADING_ROLES
    assert not {"sync-reconciler", "maintenance"} & FIXED_HEADING_ROLES
    for role in sorted(held):  # each held role reads the rule
        assert f"`{rule}`" in texts.texts[f"model:{role}"][1], role
    assert f"`{rule}`" in texts.texts["skill:maintain-rmtui"][1]

    block = dict(re.findall(r"```([^\n`]+)\n(.*?)```", doctrine_sections()["agent-corrections"],
                            re.DOTALL))["MEMORY.md"]
    writing = "### Writing corrections {M#agent-corrections-writing}"
    design = "### Design corrections {M#agent-corrections-design}"
    assert writing in block and design in block

    def graph(name: str, memory: str, extra: dict[str, str] | None = None):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "MEMORY.md").write_text("# Memory\n\n" + memory, encoding="utf-8")
        for file, text in (extra or {}).items():
            (folder / file).write_text(text, encoding="utf-8")
        return load_graph(folder)

    base = graph("base", block)
    allowed = graph("allowed", block.replace(writing, "### Wording corrections {M#agent-corrections-writing}")
                    .replace(design + "\n", "").replace("## Agent corrections", design + "\n\n## Agent corrections"))
    refused = {
        "removed": graph("removed", block.replace(design + "\n", "")),
        "anchor kind": graph("kind", block.replace("{M#agent-corrections-design}", "{F#agent-corrections-design}")),
        "anchor id": graph("id", block.replace("{M#agent-corrections-design}", "{M#design-lessons}")),
        "other file": graph("moved", block.replace(design + "\n", "") + "\n## Lessons {F#lessons}\n",
                            {"MEMORY_lessons.md": design + "\n"}),
    }
    for role in sorted(held) + ["sync-reconciler", "maintenance"]:
        check_fixed_headings(base, allowed, role)
        for how, candidate in refused.items():
            if role not in held:
                check_fixed_headings(base, candidate, role)
                continue
            with pytest.raises(AdmissionRefused) as info:
                check_fixed_headings(base, candidate, role)
            assert info.value.rule == rule and "{M#agent-corrections-design}" in str(info.value), (role, how)


def test_a_selected_skill_or_m_heading_renders_as_the_retrieve_text_says(texts, tmp_path):
    """"A heading id alone tells the caller when it applies": selecting the worked example's
    ``S#`` and ``M#`` headings renders the heading lines and body, never the files' text."""
    from test_doctrine_examples import example, files_of

    from rmtui.engine.retrieval.render import render

    root = init_root(tmp_path / "example")
    files = files_of(example("retrieve"))
    for name, body in files.items():
        (root.path / name).write_text(body, encoding="utf-8")
    corpus = load_corpus(root.path)
    text = render(corpus, resolve_selection(corpus, {"ids": ["cut-release", "release-notes", "build"]}),
                  max_chars=10_000).text
    assert "{S#cut-release}" in text and "Use when tagging" in text and "{M#release-notes}" in text
    for line in files["MEMORY_SKILL_cut-release.md"].splitlines() + files["MEMORY_release-notes.md"].splitlines():
        assert not line.strip() or line not in text, f"a heading selection pulled in free-form text: {line}"


# -- one validator -------------------------------------------------------------------------------

def test_the_model_tool_and_the_cli_validator_answer_the_same_for_every_role(texts, tmp_path):
    """16 correction entries and an unlinked collection: every role's ``validate_memory`` says
    what ``rmtui --headless validate --path`` says (text and validity)."""
    import subprocess
    import sys

    from rmtui.engine.memory.validation import MAX_CORRECTIONS

    root = init_root(tmp_path / "over")
    entry = "## Entry {n}\n\n### Candidate\nc\n\n### Proposed edit\np\n\n### Accepted edit\na\n\n"
    (root.path / "corrections.md").write_text("".join(entry.format(n=n) for n in range(MAX_CORRECTIONS + 1)),
                                              encoding="utf-8")
    (root.path / "MEMORY_agent-corrections-design.md").write_text("### One\n\nx\n", encoding="utf-8")
    cli = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "validate", "--path", str(root.path)],
                         capture_output=True, text=True)
    assert cli.returncode == 1 and "corrections-capacity" in cli.stdout and "collection-unlinked" in cli.stdout
    for role in role_table.ROLES:
        tools = RoleTools(root.path, role)
        answer = tools.validate_memory({})
        tools.repo.close()
        assert answer == "invalid:\n" + cli.stdout.rstrip("\n"), role
        if "validate_memory" in _role_tools(role, root.path):
            assert "validate --path" in assistant.tool_mapping(role, str(root.path))


# -- ledger lines and submit answers, as the program writes them ---------------------------------

def test_every_ledger_line_a_text_shows_is_one_the_program_writes_and_reads(texts):
    from rmtui.engine.cycles.ledger import format_ledger, parse_ledger

    problems, n = [], 0
    for key, (_, text) in texts.texts.items():
        for line in re.findall(r"(?i)ledger line `(- [^`]+)`", text):
            n += 1
            entries = parse_ledger("Removed:\n" + line).removed
            if len(entries) != 1 or format_ledger([(entries[0].file or "", entries[0].id,
                                                    line.split(": ", 1)[-1])], []) != "Removed:\n" + line:
                problems.append(f"{key}: the ledger line `{line}` is not one a prune commit holds")
    assert n, "no text shows a ledger line"
    _report(problems)


def test_no_text_says_a_saved_submission_is_queued_when_it_may_wait_for_approval(texts):
    """With ``approval = "required"`` a saved submission waits in the inbox for a person."""
    problems = []
    for key, (_, text) in texts.texts.items():
        for sentence in re.split(r"(?<=[.;])\s+|\n\s*\n", text):
            if re.search(r"`saved`[^.;]*\bmeans\b", sentence) and not re.search(r"(?i)inbox|approv", sentence):
                problems.append(f"{key}: {' '.join(sentence.split())[:140]}")
    _report(problems)

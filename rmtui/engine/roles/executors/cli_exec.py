"""CLI executors: ``claude`` and ``codex`` run as subprocesses in the role's worktree.

The provider program uses its own file tools, so the permission it is started with is the
guard before admission: read roles run read-only (claude ``plan``, codex ``read-only``);
writer roles may edit their worktree (claude ``acceptEdits`` with Git commands allowed,
codex ``workspace-write`` plus the repository's Git folder so commits work). The prompt
goes on standard input (no argument-length limit). A role that must end with a structured
answer (a terminal tool, e.g. the retrieval selection) is asked for a JSON object, which is
parsed and handed to that tool; an invalid answer is retried with the error, boundedly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rmtui.engine.errors import OperationFailed, UnavailableError, UsageError
from rmtui.engine.memory import role_table as roles
from rmtui.engine.roles.executors.base import (
    AbortTurn,
    Conversation,
    Executor,
    ExecutorSettings,
    ToolError,
    ToolSpec,
    TurnResult,
)
from rmtui.engine.roles.executors.trace import DebugTrace

CLAUDE_GIT_TOOLS = ("Bash(git status:*)", "Bash(git diff:*)", "Bash(git log:*)", "Bash(git add:*)",
                    "Bash(git rm:*)", "Bash(git mv:*)", "Bash(git commit:*)")
_FENCED_JSON = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object a CLI model answered with (bare, or in a fenced block)."""
    candidates = [m.group(1) for m in _FENCED_JSON.finditer(text)]
    stripped = text.strip()
    if stripped.startswith("{"):
        candidates.insert(0, stripped)
    start = stripped.find("{")
    end = stripped.rfind("}")
    if start != -1 and end > start:
        candidates.append(stripped[start:end + 1])
    for raw in candidates:
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ToolError("the answer is not a JSON object")


class CliExecutor(Executor):
    def __init__(self, settings: ExecutorSettings) -> None:
        if settings.provider not in roles.CLI_PERMISSIONS:
            raise UsageError(f"unknown CLI provider {settings.provider!r} (claude or codex)")
        self.settings = settings
        self.program = settings.command or settings.provider

    @property
    def describe(self) -> str:
        return f"{self.settings.provider} CLI" + (f" ({self.settings.model})" if self.settings.model else "")

    @property
    def permission(self) -> str:
        return roles.cli_permission(self.settings.provider, self.settings.role)

    def start(self, *, system: str, tools: list[ToolSpec], cwd: str | None = None,
              trace: DebugTrace | None = None) -> Conversation:
        return CliConversation(self, system, tools, cwd, trace or DebugTrace.disabled())

    def argv(self, cwd: str, output_file: str | None, resume: str | None = None) -> list[str]:
        s = self.settings
        exe = shutil.which(self.program)
        if exe is None:
            raise UnavailableError(f"{s.role}: the {s.provider} program {self.program!r} is not on PATH")
        writer = roles.role_spec(s.role).writer
        if s.provider == "claude":
            argv = [exe, "-p", "--output-format", "json", "--permission-mode", self.permission]
            if s.model:
                argv += ["--model", s.model]
            if writer:
                argv += ["--allowedTools", *CLAUDE_GIT_TOOLS]
            if resume:
                argv += ["--resume", resume]
            return argv
        argv = [exe, "exec", "--sandbox", self.permission, "--skip-git-repo-check", "--cd", cwd]
        if s.model:
            argv += ["--model", s.model]
        if writer:
            gitdir = _git_common_dir(cwd)
            if gitdir:
                argv += ["--add-dir", gitdir]
        if output_file:
            argv += ["--output-last-message", output_file]
        argv.append("-")
        return argv


def _git_common_dir(cwd: str) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=cwd,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class CliConversation(Conversation):
    def __init__(self, executor: CliExecutor, system: str, tools: list[ToolSpec], cwd: str | None,
                 trace: DebugTrace) -> None:
        self.executor = executor
        self.system = system
        self.cwd = str(Path(cwd or os.getcwd()).resolve())
        self.terminal = next((t for t in tools if t.terminal), None)
        self.trace = trace
        self.history: list[tuple[str, str]] = []
        self.session_id: str | None = None  # claude: continue the same conversation
        s = executor.settings
        trace.event("start", role=s.role, provider=s.provider, model=s.model, cwd=self.cwd,
                    permission=executor.permission)

    def _prompt(self, text: str) -> str:
        parts = []
        if self.session_id is None:
            parts.append(self.system)
            if self.history:
                parts.append("Conversation so far:\n" + "\n\n".join(f"[{who}]\n{msg}" for who, msg in self.history))
        parts.append(text)
        if self.terminal is not None:
            parts.append(
                f"Finish by answering with only one JSON object (no prose) for {self.terminal.name}: "
                f"{self.terminal.description}\nJSON schema: {json.dumps(self.terminal.parameters)}")
        return "\n\n".join(parts)

    def _invoke(self, prompt: str) -> str:
        ex = self.executor
        s = ex.settings
        with tempfile.TemporaryDirectory(prefix="rmtui-cli-") as tmp:
            out_file = os.path.join(tmp, "last-message.txt") if s.provider == "codex" else None
            argv = ex.argv(self.cwd, out_file, resume=self.session_id)
            self.trace.event("cli_invoke", argv=argv)
            try:
                proc = subprocess.run(argv, input=prompt, cwd=self.cwd, capture_output=True, text=True,
                                      timeout=s.timeout_seconds)
            except subprocess.TimeoutExpired:
                self.trace.event("failure", error="timeout")
                raise OperationFailed(f"{s.role}: {s.provider} did not finish within {s.timeout_seconds} s") from None
            except OSError as exc:
                raise UnavailableError(f"{s.role}: cannot run {argv[0]}: {exc}") from exc
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip()[-800:]
                self.trace.event("failure", error="exit", code=proc.returncode, stderr=tail)
                raise OperationFailed(f"{s.role}: {s.provider} exited with {proc.returncode}: {tail}")
            if out_file and os.path.exists(out_file):
                return Path(out_file).read_text(encoding="utf-8")
        if s.provider == "claude":
            try:
                payload = json.loads(proc.stdout)
            except ValueError:
                return proc.stdout
            if isinstance(payload, dict):
                if payload.get("is_error"):
                    raise OperationFailed(f"{s.role}: claude reported an error: {payload.get('result')}")
                self.session_id = payload.get("session_id") or self.session_id
                return str(payload.get("result", ""))
        return proc.stdout

    def send(self, text: str) -> TurnResult:
        s = self.executor.settings
        prompt = self._prompt(text)
        requests = 0
        while True:
            requests += 1
            answer = self._invoke(prompt)
            self.trace.event("model_reply", request=requests, text=answer)
            self.history += [("user", text), ("assistant", answer)]
            if self.terminal is None:
                self.trace.event("finish", requests=requests)
                return TurnResult(answer, requests)
            try:
                arguments = extract_json_object(answer)
                self.trace.event("tool_call", name=self.terminal.name, arguments=arguments)
                result = self.terminal.handler(arguments)
            except AbortTurn:
                raise
            except (ToolError, UsageError) as exc:
                self.trace.event("tool_output", name=self.terminal.name, is_error=True, output=exc.message)
                if requests > s.tool_retries:
                    raise OperationFailed(f"{s.role}: no valid answer after {requests} attempts: "
                                          f"{exc.message}") from None
                text = (f"Your answer was refused: {exc.message}\nAnswer again with only the corrected JSON "
                        f"object for {self.terminal.name}.")
                prompt = self._prompt(text)
                continue
            self.trace.event("finish", terminal=self.terminal.name, requests=requests)
            return TurnResult(answer, requests, [{"name": self.terminal.name, "arguments": arguments}],
                              {"name": self.terminal.name, "arguments": arguments, "result": result})

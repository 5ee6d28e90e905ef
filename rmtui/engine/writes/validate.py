"""The one validator a person, a host's child and a model role all run (docs/architecture.md,
"The memory root").

``rmtui --headless validate`` and the ``validate_memory`` role tool both call
:func:`validate_worktree` and print :func:`report_text`, so whoever asks about the same tree
gets the same answer, whatever their role. Correction capacity is always checked here: a
tree over capacity is invalid. Admission is the other reader of these rules and leaves an
old over-capacity file alone unless the candidate changes it
(:mod:`rmtui.engine.writes.admission`).
"""

from __future__ import annotations

from pathlib import Path

from rmtui.engine.memory.validation import Report, validate_root
from rmtui.engine.writes.config_check import config_issues


def validate_worktree(folder: Path | str) -> Report:
    """Graph, corrections, collections and the config files the loader reads, as one report."""
    report = validate_root(folder)
    report.issues.extend(config_issues(folder))  # a config the loader refuses stops every agent too
    return report


def report_text(report: Report) -> str:
    """Each issue as ``FILE:LINE: [warning: ]rule: message``, then ``valid: …`` when it is valid."""
    lines = [str(i) for i in report.issues]
    if report.ok:  # warnings alone never fail validation
        c = report.graph.counts()
        n = len(report.warnings)
        note = f" ({n} warning{'s' if n != 1 else ''})" if n else ""
        lines.append(f"valid: {c['headings']} headings, {c['nodes']} nodes in {c['files']} files{note}")
    return "\n".join(lines)

"""Another fit of the second stage, for the benches to score beside today's in one run.

Why: a fit is judged against the one before it, and two figures measured in different runs on a
busy machine (or on roots indexed differently) say little. ``--compare-weights`` names the
earlier weights -- a file written by ``bench/fit_stage2.py``, or a Git revision whose
``rmtui/engine/retrieval/stage2_weights.py`` is read -- and the bench ranks each question with
them too, on the same roots, the same first stage and the same vectors.

The earlier weights must describe features today's code computes (a linear model over other
columns cannot be applied to these); a fit over fewer of them, made before a feature was added,
is scored on its own columns (``stage2.rerank`` picks them by name). A fit written before
``Weights.thread_span`` existed read ``thread`` unbounded, and is scored so.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rmtui.engine.retrieval import stage2, stage2_weights
from rmtui.engine.retrieval.stage2_model import Weights

REPO = Path(__file__).resolve().parent.parent
WEIGHTS_PATH = "rmtui/engine/retrieval/stage2_weights.py"
#: ``thread`` unbounded: what a fit made before the span was recorded read.
UNBOUNDED = (float("-inf"), float("inf"))


class WeightsError(ValueError):
    """The named weights cannot be read or do not fit today's features."""


@dataclass(frozen=True)
class Fit:
    """One fit's two weight sets and where they came from."""

    label: str
    plain: Weights
    tokens: Weights


def _source(spec: str) -> tuple[str, str]:
    """The text of the weights ``spec`` names (a file, else a Git revision) and a label for it."""
    path = Path(spec)
    if path.is_file():
        return path.read_text(encoding="utf-8"), path.name
    got = subprocess.run(["git", "-C", str(REPO), "show", f"{spec}:{WEIGHTS_PATH}"], capture_output=True, text=True)
    if got.returncode != 0:
        raise WeightsError(f"--compare-weights {spec}: neither a file nor a Git revision holding {WEIGHTS_PATH}")
    return got.stdout, f"fit of {spec}"


def load(spec: str) -> Fit:
    """The fit ``spec`` names; :class:`WeightsError` when it cannot be scored with today's features."""
    text, label = _source(spec)

    def weights(*, features, mean, scale, coef, thread_span=UNBOUNDED) -> Weights:
        return Weights(tuple(features), tuple(mean), tuple(scale), tuple(coef), tuple(thread_span))

    space: dict = {}
    try:
        code = compile(text.replace("from rmtui.engine.retrieval.stage2_model import Weights", ""), label, "exec")
        exec(code, {"Weights": weights}, space)  # noqa: S102 -- the bench's own file or Git history
    except Exception as exc:  # noqa: BLE001 -- any failure is "not a weights file"
        raise WeightsError(f"--compare-weights {label}: not a weights file ({type(exc).__name__}: {exc})") from None
    plain, tokens = space.get("PLAIN"), space.get("TOKENS")
    if not isinstance(plain, Weights) or not isinstance(tokens, Weights):
        raise WeightsError(f"--compare-weights {label}: defines no PLAIN and TOKENS weights")
    for name, w, want in (("PLAIN", plain, stage2.FEATURES),
                          ("TOKENS", tokens, stage2.FEATURES + stage2.TOKEN_FEATURES)):
        extra = sorted(set(w.features) - set(want))
        if extra:  # fewer features than today's is fine: the stage reads a fit's own columns
            lacking = sorted(set(want) - set(w.features))
            raise WeightsError(f"--compare-weights {label}: its {name} weights describe other features than today's "
                               f"(theirs only: {', '.join(extra) or '-'}; today's only: {', '.join(lacking) or '-'})")
    return Fit(label, plain, tokens)


@contextmanager
def using(fit: Fit | None) -> Iterator[None]:
    """Rank with ``fit``'s weights inside the block (today's when None), then today's again."""
    if fit is None:
        yield
        return
    saved = stage2_weights.PLAIN, stage2_weights.TOKENS
    stage2_weights.PLAIN, stage2_weights.TOKENS = fit.plain, fit.tokens
    try:
        yield
    finally:
        stage2_weights.PLAIN, stage2_weights.TOKENS = saved


def add_compare_option(ap) -> None:
    """The ``--compare-weights`` option of a quality bench."""
    ap.add_argument("--compare-weights", metavar="FILE|REV",
                    help="also rank with this earlier fit of the second stage (a weights file or a Git revision)")


def compared_fit(ap, spec: str | None) -> Fit | None:
    """The fit ``--compare-weights`` names, or None; a bad one ends the bench as a usage error."""
    if not spec:
        return None
    try:
        return load(spec)
    except WeightsError as exc:
        ap.error(str(exc))
        raise  # ap.error exits; this keeps the type checker's view of the flow

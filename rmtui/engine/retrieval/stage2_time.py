"""Time in a need and in a node, as the second stage reads it.

Why: a need that asks *when* ("When did Ana move to Berlin?", "how long has staging run on
5433?") is answered by the note that says when -- "yesterday", "last week", "in 2022",
"since March", "three years ago" -- yet BM25 drops "when" as a stop word and one pooled vector
barely weighs it. The second stage therefore reads whether each candidate states a time
(:func:`dated`) and whether it does so for a need that asks for one (:func:`asks_time`).
Measured by ``bench/fit_stage2.py --cv`` on the development sets: R@5 +0.005 to +0.013 on
the four layouts of the conversations, notes R@5 / R@10 +0.002 / +0.005.

The rules are plain English surface forms, deliberately narrow: a month name counts only
capitalised ("May" the month, not "may" the verb), a unit of time only with a count ("3
weeks", "a few years"), and a need asks for a time only when a sentence of it starts so ("the
build fails when the cache is cold" does not ask when).
"""

from __future__ import annotations

import re

_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_RELATIVE = (r"yesterday|today|tonight|tomorrow|recently|ago"
             rf"|(?:last|next|this|past|coming) (?:week|weekend|month|year|night|morning|evening"
             rf"|summer|winter|spring|fall|autumn|{_WEEKDAY})")
_COUNTED = (r"(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|several|couple of)"
            r" (?:years?|months?|weeks?|days?)")
_MONTH = r"January|February|March|April|May|June|July|August|September|October|November|December"
#: A time stated in a node: a relative day or period, a weekday, a year, a counted unit of
#: time, or a (capitalised) month name.
TIME_RE = re.compile(rf"(?i:\b(?:{_RELATIVE}|{_WEEKDAY}s?|weekends?|(?:19|20)\d\d|{_COUNTED})\b)|\b(?:{_MONTH})\b")
#: A sentence of the need that asks for a time.
ASKS_RE = re.compile(r"(?:^|[.?!]\s+)(?:when|how long|since when|what (?:year|month|date|day|time)"
                     r"|which (?:year|month|day|date)|how many (?:years|months|weeks|days)|in (?:what|which) year)\b",
                     re.IGNORECASE)


def asks_time(need: str) -> bool:
    """Whether a sentence of ``need`` asks when, how long, or in what year/month/day."""
    return bool(ASKS_RE.search(need.strip()))


def dated(text: str) -> bool:
    """Whether ``text`` states a time (:data:`TIME_RE`)."""
    return bool(TIME_RE.search(text))

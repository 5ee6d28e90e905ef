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
from functools import lru_cache

_WEEKDAYS = tuple(f"{d}day" for d in ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun"))
#: Words that state a time on their own (lower case).
ALONE = frozenset(("yesterday", "today", "tonight", "tomorrow", "recently", "ago", "weekend", "weekends",
                   *_WEEKDAYS, *(f"{d}s" for d in _WEEKDAYS)))
#: A period after one of :data:`RELATIVE` ("last week", "next summer", "this Friday").
PERIODS = frozenset(("week", "weekend", "month", "year", "night", "morning", "evening", "summer", "winter",
                     "spring", "fall", "autumn", *_WEEKDAYS))
RELATIVE = frozenset(("last", "next", "this", "past", "coming"))
#: A unit of time after a count ("3 weeks", "a few years", "a couple of months").
UNITS = frozenset(("year", "years", "month", "months", "week", "weeks", "day", "days"))
COUNTS = frozenset(("a", "an", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                    "few", "several"))
#: Month names count only capitalised ("May" the month, not "may" the verb).
MONTHS = frozenset(("January", "February", "March", "April", "May", "June", "July", "August", "September",
                    "October", "November", "December"))
_WORD_RE = re.compile(r"\w+|[^\w\s]")  # punctuation breaks a pair: "one-year-old" states no time
#: A sentence of the need that asks for a time.
ASKS_RE = re.compile(r"(?:^|[.?!]\s+)(?:when|how long|since when|what (?:year|month|date|day|time)"
                     r"|which (?:year|month|day|date)|how many (?:years|months|weeks|days)|in (?:what|which) year)\b",
                     re.IGNORECASE)


def asks_time(need: str) -> bool:
    """Whether a sentence of ``need`` asks when, how long, or in what year/month/day."""
    return bool(ASKS_RE.search(need.strip()))


@lru_cache(maxsize=65536)
def dated(text: str) -> bool:
    """Whether ``text`` states a time: a relative day or period, a weekday, a year (19xx, 20xx),
    a counted unit of time, or a capitalised month name. One pass over its words with set
    lookups (a regular expression of these alternatives costs twice as much), remembered per
    text, since a long-lived process meets the same candidates again."""
    before = before2 = ""
    for word in _WORD_RE.findall(text):
        low = word.lower()
        if low in ALONE or word in MONTHS or (len(word) == 4 and word.isdigit() and word[:2] in ("19", "20")):
            return True
        if low in PERIODS and before in RELATIVE:
            return True
        if low in UNITS and (before in COUNTS or before.isdigit() or (before == "of" and before2 == "couple")):
            return True
        before2, before = before, low
    return False

"""One validation of every queue record, whichever way it arrives (docs/formats.md,
"Queue records: what a machine accepts").

A candidate, lease, recovery record, publication marker or update record is checked here
with the original tool's field rules plus rmtui's own limits for evidence (the
``update.max_evidence_bytes`` bound, no NUL, valid UTF-8, the session-id rule of a local
submit). A local submit and a pull apply the same rules, so a record another machine
pushed is never trusted more than one typed here. Anything that is not a valid record,
whatever its bytes, raises :class:`RecordRefused` naming the file and the rule; no other
exception leaves these functions.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from rmtui.engine.errors import UsageError
from rmtui.engine.evidence import records
from rmtui.engine.evidence.queue import check_message, check_session_id, evidence_limit

HEX32 = re.compile(r"[0-9a-f]{32}")
OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
SHA256 = re.compile(r"[0-9a-f]{64}")
BATCH_ID = re.compile(r"update-batch-[0-9a-f]{64}")
REASON_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: Display ids and attempts stay within a signed 64-bit integer (the store's column type).
MAX_INT = 2**63 - 1
#: The most candidates one lease, recovery or update record may name.
MAX_BATCH = 10_000
#: A lease, recovery record or marker is a few hundred bytes; anything far larger is refused unread.
SMALL_RECORD_BYTES = 1 << 20
#: JSON may escape a character as ``\\uXXXX`` (6 bytes), so a candidate's file may be that much
#: larger than its message, plus room for the other fields.
ESCAPE_FACTOR = 6
FIELD_ROOM = 4096

LEASE_KEYS = frozenset({"schema_version", "holder", "token", "base_commit", "batch_id", "candidate_uids",
                        "expires_at"})
RECOVERY_KEYS = frozenset({"schema_version", "batch_id", "candidate_uids", "attempts", "reason_code", "retry_at",
                           "manual_recovery"})
MARKER_KEYS = frozenset({"schema_version", "candidate_uid", "attempt_id", "attempted_at", "candidate_sha256",
                         "proposed_commit"})


class RecordRefused(UsageError):
    """A queue record that breaks a rule: ``path: rule: reason`` (exit 2)."""

    def __init__(self, path: str, rule: str, reason: str) -> None:
        shown = path if path.isprintable() and path.isascii() else path.encode("unicode_escape").decode("ascii")
        super().__init__(f"{shown}: {rule}: {reason}", details={"files": [shown], "rule": rule})
        self.path, self.rule, self.reason = path, rule, reason


# -- JSON --------------------------------------------------------------------------------------

def load(path: str, blob: bytes, *, max_bytes: int = SMALL_RECORD_BYTES) -> dict:
    """Strict JSON of one record: bounded size, UTF-8, an object, no duplicate field, no NaN."""
    if len(blob) > max_bytes:
        raise RecordRefused(path, "record-size", f"{len(blob)} bytes, more than {max_bytes}")
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordRefused(path, "record-json", f"not UTF-8 (byte {exc.start})") from None

    def no_dupes(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"duplicate JSON field {k!r}")
            out[k] = v
        return out

    def no_constant(name):
        raise ValueError(f"{name} is not a JSON number")

    try:
        data = json.loads(text, object_pairs_hook=no_dupes, parse_constant=no_constant)
    except RecursionError:
        raise RecordRefused(path, "record-json", "nested too deeply") from None
    except ValueError as exc:
        raise RecordRefused(path, "record-json", f"invalid JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise RecordRefused(path, "record-json", "not a JSON object")
    return data


def _fields(data: dict, keys: frozenset[str], path: str, kind: str) -> None:
    missing, unknown = sorted(keys - set(data)), sorted(set(data) - keys)
    if missing:
        raise RecordRefused(path, f"{kind}-fields", f"missing field(s): {', '.join(missing)}")
    if unknown:
        raise RecordRefused(path, f"{kind}-fields",
                            "unsupported field(s): " + ", ".join(repr(k)[:40] for k in unknown[:5]))
    version = data["schema_version"]
    if type(version) is not int or version != records.SCHEMA_VERSION:
        raise RecordRefused(path, f"{kind}-schema_version", f"must be {records.SCHEMA_VERSION}")


def _match(value, pattern: re.Pattern, path: str, rule: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise RecordRefused(path, rule, f"must be {what}")
    return value


def _int(value, path: str, rule: str, low: int) -> int:
    if type(value) is not int or not low <= value <= MAX_INT:
        raise RecordRefused(path, rule, f"must be an integer of at least {low}")
    return value


def utc_time(value, path: str, rule: str) -> datetime:
    """A canonical UTC isoformat time (``2026-07-27T12:00:00+00:00``), as the original writes it."""
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = datetime.fromisoformat(value)
            if parsed.tzinfo is not None and parsed.astimezone(UTC).isoformat() == value:
                return parsed
        except (ValueError, OverflowError):
            pass
    raise RecordRefused(path, rule, "must be a canonical UTC time such as 2026-07-27T12:00:00+00:00")


def _uids(value, path: str, rule: str) -> list[str]:
    if not isinstance(value, list) or not value or len(value) > MAX_BATCH:
        raise RecordRefused(path, rule, f"must be a list of 1 to {MAX_BATCH} candidate uids")
    for uid in value:
        _match(uid, HEX32, path, rule, "a list of 32-hex candidate uids")
    if value != sorted(set(value)):
        raise RecordRefused(path, rule, "must be sorted and unique")
    return value


def _named(path: str, expected: str, rule: str) -> None:
    if path.rsplit("/", 1)[-1] != f"{expected}.json":
        raise RecordRefused(path, rule, f"the file is not named by its record ({expected}.json)")


# -- records -----------------------------------------------------------------------------------

def check_candidate(data: dict, path: str, *, limit: int) -> dict:
    """A candidate: the original's field rules, the submit's session-id rule and evidence limits."""
    _fields(data, records.CANDIDATE_KEYS, path, "candidate")
    _match(data["uid"], HEX32, path, "candidate-uid", "32 lowercase hex digits")
    session = data["session_id"]
    if not isinstance(session, str):
        raise RecordRefused(path, "candidate-session_id", "must be text")
    try:
        check_session_id(session)
    except UsageError as exc:
        raise RecordRefused(path, "candidate-session_id", exc.message) from None
    _int(data["display_id"], path, "candidate-display_id", 1)
    try:
        check_message(data["message"], limit=limit)
    except UsageError as exc:
        raise RecordRefused(path, "candidate-message", exc.message) from None
    utc_time(data["submitted_at"], path, "candidate-submitted_at")
    return data


def candidate_file(path: str, blob: bytes, *, limit: int) -> dict:
    """A candidate file ``update_queue/candidates/<uid>.json``."""
    data = load(path, blob, max_bytes=ESCAPE_FACTOR * evidence_limit(limit) + FIELD_ROOM)
    check_candidate(data, path, limit=limit)
    _named(path, data["uid"], "candidate-name")
    return data


def check_lease(data: dict, path: str) -> dict:
    _fields(data, LEASE_KEYS, path, "lease")
    _match(data["holder"], HEX32, path, "lease-holder", "a device id (32 lowercase hex digits)")
    _match(data["token"], HEX32, path, "lease-token", "32 lowercase hex digits")
    _match(data["base_commit"], OID, path, "lease-base_commit", "a lowercase Git object id")
    _match(data["batch_id"], BATCH_ID, path, "lease-batch_id", "update-batch- and 64 lowercase hex digits")
    _uids(data["candidate_uids"], path, "lease-candidate_uids")
    utc_time(data["expires_at"], path, "lease-expires_at")
    return data


def lease_file(path: str, blob: bytes) -> dict:
    return check_lease(load(path, blob), path)


def check_recovery(data: dict, path: str) -> dict:
    _fields(data, RECOVERY_KEYS, path, "recovery")
    _match(data["batch_id"], BATCH_ID, path, "recovery-batch_id", "update-batch- and 64 lowercase hex digits")
    _uids(data["candidate_uids"], path, "recovery-candidate_uids")
    _int(data["attempts"], path, "recovery-attempts", 0)
    _match(data["reason_code"], REASON_CODE, path, "recovery-reason_code", "a code matching [a-z][a-z0-9_]{0,63}")
    manual = data["manual_recovery"]
    if type(manual) is not bool:
        raise RecordRefused(path, "recovery-manual_recovery", "must be true or false")
    if manual and data["retry_at"] is not None:
        raise RecordRefused(path, "recovery-retry_at", "must be null for a manual recovery")
    if not manual:
        utc_time(data["retry_at"], path, "recovery-retry_at")
    return data


def recovery_file(path: str, blob: bytes) -> dict:
    data = check_recovery(load(path, blob), path)
    _named(path, data["batch_id"], "recovery-name")
    return data


def check_marker(data: dict, path: str) -> dict:
    """A local publication marker (``.runtime/async/update/publication/<uid>.json``)."""
    _fields(data, MARKER_KEYS, path, "marker")
    _match(data["candidate_uid"], HEX32, path, "marker-candidate_uid", "32 lowercase hex digits")
    _match(data["attempt_id"], HEX32, path, "marker-attempt_id", "32 lowercase hex digits")
    utc_time(data["attempted_at"], path, "marker-attempted_at")
    _match(data["candidate_sha256"], SHA256, path, "marker-candidate_sha256", "64 lowercase hex digits")
    if data["proposed_commit"] is not None:
        _match(data["proposed_commit"], OID, path, "marker-proposed_commit", "null or a lowercase Git object id")
    return data


def update_record_file(path: str, blob: bytes, *, limit: int) -> dict:
    """An update record ``update_records/<batch id>.json``: its full candidates, each valid,
    sorted and unique, and an operation id that is their batch id."""
    cap = MAX_BATCH * (ESCAPE_FACTOR * evidence_limit(limit) + FIELD_ROOM)
    data = load(path, blob, max_bytes=min(cap, 256 << 20))
    _fields(data, records.RECORD_KEYS, path, "update_record")
    op_id = _match(data["operation_id"], BATCH_ID, path, "update_record-operation_id",
                   "update-batch- and 64 lowercase hex digits")
    _named(path, op_id, "update_record-name")
    cands = data["candidates"]
    if not isinstance(cands, list) or not cands or len(cands) > MAX_BATCH:
        raise RecordRefused(path, "update_record-candidates", f"must be a list of 1 to {MAX_BATCH} candidates")
    for c in cands:
        if not isinstance(c, dict):
            raise RecordRefused(path, "update_record-candidates", "every candidate must be a JSON object")
        check_candidate(c, path, limit=limit)
    if len({c["uid"] for c in cands}) != len(cands):
        raise RecordRefused(path, "update_record-candidates", "a candidate uid appears twice")
    if cands != sorted(cands, key=records.candidate_order):
        raise RecordRefused(path, "update_record-candidates", "candidates must be sorted by session, display id, "
                                                              "time and uid")
    if records.batch_id(cands) != op_id:
        raise RecordRefused(path, "update_record-operation_id", "is not the batch id of its candidates")
    return data


def batch_matches(batch: str, uids: list[str], candidates: dict[str, dict]) -> bool:
    """``batch`` is the batch id of exactly these candidates, all present."""
    try:
        return all(u in candidates for u in uids) and records.batch_id(candidates[u] for u in uids) == batch
    except ValueError:
        return False

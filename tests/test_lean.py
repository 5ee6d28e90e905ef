"""``engine/lean.py`` answers what the standard modules answer (the thin client relies on it)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmtui.engine import lean

LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20)


@given(JSON, st.sampled_from([{}, {"indent": 1}, {"ensure_ascii": False}]), st.sampled_from(["", " ", "\n\t "]))
def test_loads_reads_what_json_writes(value, how, pad):
    text = pad + json.dumps(value, **how) + pad
    assert lean.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', "[1,]", "NaN", '{"a": Infinity}', "'a'", "[1] [2]"])
def test_loads_refuses_what_is_not_one_json_document(text):
    with pytest.raises(ValueError):
        lean.loads(text)


@given(st.text())
def test_quote_is_json_dumps_ascii(text):
    assert lean.quote(text) == json.dumps(text)


@given(st.binary())
def test_sha256_is_hashlib_sha256(data):
    assert lean.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    h = lean.sha256()
    h.update(data)
    assert h.digest() == hashlib.sha256(data).digest()

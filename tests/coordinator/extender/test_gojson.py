"""Reading JSON as Go does, on its own: case-insensitive keys (the last one winning) and
what Go would not read."""

from __future__ import annotations

import pytest

from coordinator.extender import gojson

# ---------------------------------------------------------------------- lookup


def test_lookup_matches_keys_case_insensitively_and_the_last_one_wins_as_in_go():
    assert gojson.lookup({"NodeNames": [1]}, "NodeNames") == [1]
    assert gojson.lookup({"nodenames": [2]}, "NodeNames") == [2]
    assert gojson.lookup({"NODENAMES": [3]}, "NodeNames") == [3]
    assert gojson.lookup({"Pod": "first", "pod": "second"}, "Pod") == "second"
    assert gojson.lookup({"Pods": 1}, "Pod") is None
    assert gojson.lookup({}, "Pod") is None


def test_parse_json_refuses_what_go_would_not_read():
    assert gojson.parse_json(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    for body in (b"{", b"NaN", b'{"a": Infinity}', b"\xff\xfe\xfa", b""):
        with pytest.raises(gojson.WireError, match="body is not JSON") as e:
            gojson.parse_json(body)
        assert e.value.status == 400

"""Watch events are read from the stream a read's worth at a time: whole, in order, each
read's completed events handed over together (one call into the event loop per read)."""

from __future__ import annotations

import io
import json

from urllib3.response import HTTPResponse

from coordinator.kube.watches import _event_batches


def event(k: int, size: int) -> dict:
    return {"type": "MODIFIED", "object": {"metadata": {"name": f"p{k}"}, "pad": "x" * size}}


def stream_of(data: bytes) -> HTTPResponse:
    """A real urllib3 response over ``data``, read in the watch's 64 KiB reads."""
    return HTTPResponse(body=io.BytesIO(data), preload_content=False)


def test_events_come_whole_in_order_batched_by_read():
    events = [event(k, 30_000) for k in range(3)]  # two fit the first 64 KiB read
    data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    batches = list(_event_batches(stream_of(data)))
    assert [len(b) for b in batches] == [2, 1]
    assert [e for b in batches for e in b] == events


def test_blank_lines_are_skipped_and_a_last_event_needs_no_newline():
    events = [event(k, 10) for k in range(3)]
    lines = [json.dumps(e).encode() for e in events]
    data = lines[0] + b"\n\n  \n" + lines[1] + b"\n" + lines[2]
    batches = list(_event_batches(stream_of(data)))
    assert batches == [events[:2], events[2:]]

"""A client that calls the coordinator's ``/volcano/*`` endpoints as Volcano's scheduler
does: Volcano's own scheduler is not built here, so the fault tests drive this in its place.

It mirrors Volcano's ``extender`` plugin (``pkg/scheduler/plugins/extender/extender.go``
and ``argument.go`` at ``ed72c7c815a9``, as described in the scheduler interoperability
reference) and the allocate action's use of it:

* every call is ``POST <urlPrefix>/<verb>`` with ``Content-Type: application/json`` through
  an HTTP client whose timeout (``extender.httpTimeout``) bounds the whole call, connecting
  included; a non-200 answer is an error;
* **predicate** is one call per (task, node), the nodes of a task judged by 16 workers at
  once (the predicate helper's ``workqueue.ParallelizeUntil(…, 16, …)``); ``{"status":
  <message>, "code": <int>}``, an empty message passes, any other fails the node;
* **prioritize** is one call per task with every node that passed; ``{"nodeScore": {…},
  "errorMessage": ""}``, a non-empty ``errorMessage`` or no ``nodeScore`` is an error;
* an error of either call with ``extender.ignorable: true`` is no opinion (the node passes,
  the task gets no extender score); without it a predicate error fails the node and a
  prioritize error leaves the task with no scores;
* the tasks of a session are placed one after another, each on its best-scored node
  (ties and no scores: the first passing node, as the nodes were listed).

Bodies carry what the reference lists of ``TaskInfo`` (``UID``, ``Name``, ``Namespace``,
``Resreq`` with GPUs in milli-units) and ``NodeInfo`` (``Name`` and its ``Node``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import yaml

PREDICATE_WORKERS: Final = 16
"""Volcano's predicate helper judges a task's nodes 16 at a time."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The plugin's arguments that change how it calls."""

    url_prefix: str
    http_timeout_s: float = 1.0
    """``extender.httpTimeout``: Volcano's default is 1 s."""
    ignorable: bool = False
    predicate_verb: str = "predicate"
    prioritize_verb: str = "prioritize"


@dataclass(frozen=True, slots=True)
class Task:
    uid: str
    name: str
    namespace: str
    cpu_m: int
    mem_b: int
    gpus: int

    def info(self) -> dict[str, Any]:
        """Its ``TaskInfo`` (Go field names: the struct has no json tags)."""
        scalars = {"nvidia.com/gpu": self.gpus * 1000} if self.gpus else {}
        resreq = {"MilliCPU": self.cpu_m, "Memory": self.mem_b, "ScalarResources": scalars}
        return {"UID": self.uid, "Name": self.name, "Namespace": self.namespace,
                "Resreq": resreq}  # fmt: skip


@dataclass(slots=True)
class Session:
    """What one session did: where each task went and how the calls ended."""

    placed: dict[str, str | None] = field(default_factory=dict)
    """Task UID to node (None: no node passed)."""
    calls: int = 0
    errors: int = 0
    """Calls that failed: timed out, refused, or answered other than 200."""
    last_error: str = ""
    seconds: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    """Of the calls that were answered, each one's time."""

    def p99_s(self) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


class ExtenderError(Exception):
    """A call Volcano counts as failed."""


class Client:
    """Volcano's extender plugin over one HTTP client session (idle connections reused,
    as Go's client does)."""

    def __init__(self, settings: Settings, http: aiohttp.ClientSession) -> None:
        self._settings = settings
        self._http = http
        self._timeout = aiohttp.ClientTimeout(total=settings.http_timeout_s)

    async def _send(self, verb: str, body: Mapping[str, Any], session: Session) -> Any:
        session.calls += 1
        url = self._settings.url_prefix.rstrip("/") + "/" + verb
        started = time.monotonic()
        try:
            async with self._http.post(url, json=body, timeout=self._timeout) as response:
                if response.status != 200:
                    raise ExtenderError(f"{verb}: HTTP {response.status}")
                reply = await response.json()
                session.latencies_s.append(time.monotonic() - started)
                return reply
        except (TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise ExtenderError(f"{verb}: {e!r}") from e

    async def predicate(self, task: Task, node: Mapping[str, Any], session: Session) -> bool:
        body = {"task": task.info(), "node": node}
        try:
            reply = await self._send(self._settings.predicate_verb, body, session)
        except ExtenderError as e:
            session.errors += 1
            session.last_error = str(e)
            return self._settings.ignorable
        return not (isinstance(reply, dict) and reply.get("status"))

    async def prioritize(
        self, task: Task, nodes: Sequence[Mapping[str, Any]], session: Session
    ) -> dict[str, float]:
        body = {"task": task.info(), "nodes": list(nodes)}
        try:
            reply = await self._send(self._settings.prioritize_verb, body, session)
            if (
                not isinstance(reply, dict)
                or reply.get("errorMessage")
                or not isinstance(reply.get("nodeScore"), dict)
            ):
                raise ExtenderError(f"prioritize: {reply!r}")
        except ExtenderError as e:
            session.errors += 1
            session.last_error = str(e)
            return {}  # ignorable: no score; else the batch score fails: no scores either
        return {str(k): float(v) for k, v in reply["nodeScore"].items()}

    async def place(self, task: Task, nodes: Sequence[Mapping[str, Any]], session: Session) -> None:
        """Predicate on every node, 16 at a time, then prioritize those that passed."""
        workers = asyncio.Semaphore(PREDICATE_WORKERS)

        async def judged(node: Mapping[str, Any]) -> bool:
            async with workers:
                return await self.predicate(task, node, session)

        verdicts = await asyncio.gather(*(judged(n) for n in nodes))
        passing = [n for n, ok in zip(nodes, verdicts, strict=True) if ok]
        if not passing:
            session.placed[task.uid] = None
            return
        scores = await self.prioritize(task, passing, session)
        best = max(passing, key=lambda n: scores.get(n["Name"], 0.0))
        session.placed[task.uid] = best["Name"]


def node_info(node: Mapping[str, Any]) -> dict[str, Any]:
    """A ``NodeInfo`` of a Node object (as the API serialises it)."""
    return {"Name": node["metadata"]["name"], "Node": dict(node)}


async def run_session(
    settings: Settings,
    tasks: Sequence[Task],
    nodes: Sequence[Mapping[str, Any]],
    session: Session | None = None,
) -> Session:
    """One allocate pass: every task placed in turn, into ``session`` (a new one by
    default: pass one to watch it from another thread); :attr:`Session.seconds` it took."""
    session = session or Session()
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        client = Client(settings, http)
        for task in tasks:
            await client.place(task, nodes, session)
    session.seconds = time.monotonic() - started
    return session


def shipped_settings(conf: Path, url_prefix: str) -> Settings:
    """The ``extender`` arguments of a ``volcano-scheduler.conf``, its URL replaced by
    ``url_prefix`` (the coordinator under test)."""
    tiers = yaml.safe_load(conf.read_text())["tiers"]
    plugins = [p for tier in tiers for p in tier["plugins"] if p["name"] == "extender"]
    if len(plugins) != 1:
        raise ValueError(f"{conf}: {len(plugins)} extender plugins, not one")
    args = plugins[0]["arguments"]
    return Settings(
        url_prefix=url_prefix,
        http_timeout_s=go_duration_s(str(args.get("extender.httpTimeout", "1s"))),
        ignorable=bool(args.get("extender.ignorable", False)),
        predicate_verb=args.get("extender.predicateVerb", "predicate"),
        prioritize_verb=args.get("extender.prioritizeVerb", "prioritize"),
    )


_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)")
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0}


def go_duration_s(text: str) -> float:
    """A Go duration of ms, s and m parts (``500ms``, ``1m30s``) in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration of ms, s and m: {text!r}")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)

"""Colocation: best-effort (BE) batch pods yield CPU when latency-sensitive (LS) pods stall.

* :mod:`common.qos` — who is BE, who is LS, who is never touched (shared with the agent,
  which checks every directive against it again);
* :mod:`~coordinator.colocation.inputs` — what one report says for the controller (LS
  pressure, LS and BE use, the BE pods), built once per report at ingest;
* :mod:`~coordinator.colocation.controller` — the per-node throttle: pure functions and a
  small hysteresis state machine on the coordinator's monotonic clock;
* :mod:`~coordinator.colocation.hub` — per-node inputs and throttles of the whole cluster,
  kept fresh by when reports were received; the directives and the explanation.

Every replica runs the controller on every report it receives (agents report to all of
them), so its state is warm when it takes over; only the leader's decisions reach agents,
Events and annotations. Decisions depend only on the reports and when they arrived, so a
new leader that received the same reports continues where the old one left off.
"""

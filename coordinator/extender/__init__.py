"""The scheduler-facing HTTP endpoints: kube-scheduler's extender (:mod:`.kube`) and
Volcano's extender plugin (:mod:`.volcano`), over one :class:`~coordinator.live.LiveCluster`.

:mod:`.wire` reads what the schedulers send (tolerantly, as Go does) and writes what they
expect back (strictly, in the casing they send); :mod:`.handling` is the HTTP plumbing
both share: a capped body, 400 for what cannot be understood, a timing per verb. Each
route module has ``add_routes(app)``; the application itself is assembled elsewhere.
"""

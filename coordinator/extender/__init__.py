"""The scheduler-facing HTTP endpoints: kube-scheduler's extender (:mod:`.kube`) and
Volcano's extender plugin (:mod:`.volcano`), over one :class:`~coordinator.live.LiveCluster`.

:mod:`.kubewire` and :mod:`.volcanowire` read what each scheduler sends (tolerantly, as
Go does: :mod:`.gojson`) and write what it expects back (strictly, in the casing it
sends); :mod:`.handling` is the HTTP plumbing
both share: a capped body, 400 for what cannot be understood, a timing per verb. Each
route module has ``add_routes(app)``; the application itself is assembled elsewhere.
"""

# The one image both halves run from: `stowage agent` (DaemonSet) and `stowage coordinator`
# (Deployment). Built by `make image` as stowage:<version in pyproject.toml>, the tag the
# manifests in daemonset/ reference.
#
# The product only: the agent, the coordinator and the CLI (common, agent, coordinator,
# cli) and their runtime dependencies. The simulator and the demo (hack/, and the `sim`
# extra: matplotlib, SciPy, tqdm) are left out; they run from a checkout with
# `pip install -e '.[sim]'`, and `stowage sim` or `--standalone` in the image say so.
#
# Dependencies come only from requirements.lock (pip-compile output: every runtime
# dependency and the build backend, pinned with hashes), so an image built today and one
# built next year hold the same packages. The package itself is then installed, without
# extras, from the source tree, offline: a dependency missing from the lock fails the
# build instead of being fetched unpinned.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock ./
RUN python -m venv /opt/stowage \
    && /opt/stowage/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY common ./common
COPY agent ./agent
COPY coordinator ./coordinator
COPY cli ./cli
RUN /opt/stowage/bin/pip install --no-index --no-build-isolation . \
    && /opt/stowage/bin/pip check

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/stowage /opt/stowage
ENV PATH=/opt/stowage/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" UID, the one the coordinator's pod runs as. The agent's
# pod overrides it with 0 (some /proc and sysfs files it reads are root-only).
USER 65532:65532
ENTRYPOINT ["stowage"]
CMD ["--help"]

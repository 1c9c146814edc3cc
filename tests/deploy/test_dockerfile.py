"""The image's install steps match the package, checked without a container engine.

The Dockerfile is read instruction by instruction: its base, its user, its entry point, what
it copies (present in the checkout and let through .dockerignore), and the extras it
installs, compared with what CI installs (the Makefile's recipe, as ``make -n`` prints it).
requirements.lock must pin, with hashes, every dependency the image installs: the package's
own, its extras', the build backend's, and theirs in turn (read from the installed
distributions' metadata where the installed version is the one locked).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.manifests import REPO

DOCKERFILE = REPO / "Dockerfile"
LOCK = REPO / "requirements.lock"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
TEST_TOOLS = "test"
"""The one CI extra the image leaves out: pytest, ruff and friends run no workload."""


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            op, _, args = line.strip().partition(" ")
            found.append((op.upper(), args.strip()))
    return found


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def test_the_base_is_a_slim_python_the_package_supports() -> None:
    defaults = dict(
        args.split("=", 1) for op, args in instructions() if op == "ARG" and "=" in args
    )
    bases = [
        re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], args.split()[0])
        for op, args in instructions()
        if op == "FROM"
    ]
    assert bases
    for base in bases:
        match = re.fullmatch(r"python:(3\.\d+)-slim(-\w+)?", base)
        assert match, base
        assert SpecifierSet(PYPROJECT["project"]["requires-python"]).contains(match.group(1))
        assert match.group(1) == "3.11"


def test_it_runs_the_stowage_console_script_as_a_non_root_user() -> None:
    stage = final_stage()
    (user,) = [args for op, args in stage if op == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric UID lets runAsNonRoot verify it"
    assert not gid or gid.isdigit()
    (entrypoint,) = [json.loads(args) for op, args in stage if op == "ENTRYPOINT"]
    assert entrypoint == ["stowage"]
    assert "stowage" in PYPROJECT["project"]["scripts"]


def test_what_it_copies_exists_and_reaches_the_build_context() -> None:
    allowed = _dockerignore_allows()
    copied = set()
    for op, args in instructions():
        if op == "COPY" and not args.startswith("--from"):
            *sources, _ = args.split()
            for source in sources:
                assert (REPO / source).exists(), source
                assert source in allowed, f"{source} is left out of the context by .dockerignore"
                copied.add(source)
    packages = {
        p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    needed = packages | {"pyproject.toml", PYPROJECT["project"]["readme"], LOCK.name}
    assert needed <= copied, f"not copied: {sorted(needed - copied)}"


def test_it_installs_the_extras_ci_installs_but_the_test_tools() -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not installed (it prints CI's install command)")
    recipe = subprocess.run(
        [make, "-s", "-n", "-B", ".venv/bin/stowage"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (ci,) = re.findall(r"pip install .*?'?-e '?\.\[([\w,-]+)\]", recipe)
    installs = [args for op, args in instructions() if op == "RUN"]
    (image,) = re.findall(r"pip install [^&]*'\.\[([\w,-]+)\]'", " ".join(installs))
    assert set(image.split(",")) == set(ci.split(",")) - {TEST_TOOLS}
    assert set(image.split(",")) == _lock_header_extras()


def test_dependencies_come_only_from_the_hashed_lock() -> None:
    runs = [args for op, args in instructions() if op == "RUN"]
    (from_lock,) = [r for r in runs if "-r requirements.lock" in r]
    assert "--require-hashes" in from_lock
    (package,) = [r for r in runs if re.search(r"pip install [^&]*'\.\[", r)]
    assert "--no-index" in package, "a dependency missing from the lock would be fetched"
    assert "pip check" in package
    for name, (_, hashes) in _lock().items():
        assert hashes, f"{name} is pinned without a hash"


def test_the_lock_pins_every_dependency_of_the_image() -> None:
    lock = {name: version for name, (version, _) in _lock().items()}
    extras = _lock_header_extras()
    wanted = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    wanted += [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    seen: set[str] = set()
    while wanted:
        requirement = wanted.pop()
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{requirement} is not in {LOCK.name}: run the command in its header"
        assert requirement.specifier.contains(lock[name], prereleases=True), (
            f"{LOCK.name} pins {name}=={lock[name]}, outside {requirement}"
        )
        if name in seen:
            continue
        seen.add(name)
        wanted += _requires(name, lock[name], requirement.extras)


# ----------------------------------------------------------------------------- helpers


def _dockerignore_allows() -> set[str]:
    """The allow-list form: everything excluded (``*``), then ``!name`` lets a path in."""
    lines = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rules[0] == "*", ".dockerignore is expected to be an allow-list"
    return {r[1:] for r in rules if r.startswith("!")}


def _lock() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) from the pip-compile output."""
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    found = {}
    for line in text.splitlines():
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)(.*)", line)
        if match:
            hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", match.group(3))
            found[canonicalize_name(match.group(1))] = (match.group(2), hashes)
    return found


def _lock_header_extras() -> set[str]:
    """The extras the lock was compiled for, from the command pip-compile records."""
    command = next(ln for ln in LOCK.read_text().splitlines() if re.match(r"#\s+pip-compile ", ln))
    return set(re.findall(r"--extra[= ](\S+)", command))


def _requires(name: str, version: str, extras: set[str]) -> list[Requirement]:
    """What ``name`` requires (with ``extras``), from its installed metadata when the
    installed version is the locked one; otherwise nothing is known offline."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return []
    if Version(dist.version) != Version(version):
        return []
    found = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": e}) for e in extras | {""}):
            found.append(requirement)
    return found

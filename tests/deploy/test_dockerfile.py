"""The image's install steps match the package, checked without a container engine.

The Dockerfile is read instruction by instruction: its base, its user, its entry point, what
it copies (present in the checkout and let through .dockerignore) and what it installs:
the product alone — the agent, the coordinator and the CLI, no ``hack/`` and no extras
(the simulator's and the demo's matplotlib, SciPy, tqdm stay out of a root agent on every
node). requirements.lock must pin, with hashes, every dependency the image installs: the
package's own, the build backend's, and theirs in turn (read from the installed
distributions' metadata where the installed version is the one locked), and no package of
the ``sim`` extra that the product does not need itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.manifests import REPO

DOCKERFILE = REPO / "Dockerfile"
LOCK = REPO / "requirements.lock"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PRODUCT = ("common", "agent", "coordinator", "cli")
"""The packages the image holds; ``hack`` (simulator, demo, emulator, benches) is not one."""
SIM_EXTRA = "sim"


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
    assert set(PRODUCT) <= packages
    needed = {*PRODUCT, "pyproject.toml", PYPROJECT["project"]["readme"], LOCK.name}
    assert needed <= copied, f"not copied: {sorted(needed - copied)}"
    assert copied & (packages - set(PRODUCT)) == set(), "the image holds the product only"
    assert "hack" not in allowed


def test_it_installs_the_package_without_extras() -> None:
    (package,) = [args for op, args in instructions() if op == "RUN" and "--no-index" in args]
    (target,) = re.findall(r"pip install (?:--[\w-]+ )*(\S+)", package)
    assert target == ".", f"installs {target}: the image takes no extras"
    assert _lock_header_extras() == set()


def test_dependencies_come_only_from_the_hashed_lock() -> None:
    runs = [args for op, args in instructions() if op == "RUN"]
    (from_lock,) = [r for r in runs if "-r requirements.lock" in r]
    assert "--require-hashes" in from_lock
    (package,) = [r for r in runs if "--no-index" in r]
    assert "--no-index" in package, "a dependency missing from the lock would be fetched"
    assert "pip check" in package
    for name, (_, hashes) in _lock().items():
        assert hashes, f"{name} is pinned without a hash"


def test_the_lock_pins_every_dependency_of_the_image() -> None:
    lock = {name: version for name, (version, _) in _lock().items()}
    wanted = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
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


def test_the_lock_leaves_out_the_simulators_extras() -> None:
    """matplotlib, SciPy and tqdm (and what only they pull in) are not installed in the
    image; requests is, since the kubernetes client needs it."""
    lock = _lock()
    extra = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][SIM_EXTRA]]
    product = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["project"]["dependencies"]}
    only_sim = {canonicalize_name(r.name) for r in extra} - product - {"requests"}
    assert only_sim, "the sim extra names no package of its own"
    assert only_sim & set(lock) == set()


def test_without_the_tooling_the_commands_that_need_it_say_so_in_one_line() -> None:
    """In the image there is no ``hack`` package: ``stowage --help`` works, and ``stowage
    sim`` and ``stowage coordinator --standalone`` answer one line and exit 2."""
    hidden = "import sys; sys.modules['hack'] = None; from cli.main import main; "
    for argv, command in (
        (["sim", "--seeds", "1"], "stowage sim"),
        (["coordinator", "--standalone"], "stowage coordinator --standalone"),
    ):
        result = subprocess.run(
            [sys.executable, "-c", hidden + f"sys.exit(main({argv!r}))"],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"{command}: needs the simulator and demo tooling"), line
    helped = subprocess.run(
        [sys.executable, "-c", hidden + "sys.exit(main(['--help']))"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert helped.returncode == 0 and "coordinator" in helped.stdout


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

"""What CI installs evalreg from: the running build's own origin, with the extra a remote needs.

``evalreg init`` writes one pip requirement into the workflows, the settings and the README.
By default it names the build running now: the commit of the repository it was installed
from (PEP 610's ``direct_url.json`` says so), else its version. An object-storage DVC
remote adds the extra that brings DVC's plugin for it (``evalreg[s3]``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from evalreg._version import __version__
from evalreg.dvcrepo import remote_extra
from evalreg.registry.schema import install_spec_problem

_NAME = "evalreg"
_PINNED = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[(?P<extras>[^\]]*)\])?(?P<rest>==.+)$"
)
_DIRECT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[(?P<extras>[^\]]*)\])?@(?P<rest>.+)$"
)
_PATH_EXTRAS = re.compile(r"^(?P<path>.*?)(?:\[(?P<extras>[^\]/]*)\])?$")


@dataclass(frozen=True)
class InstallSpec:
    """The requirement CI installs evalreg from, and what a user should know about it."""

    spec: str
    warnings: tuple[str, ...] = ()


def running_build(dist: metadata.Distribution | None = None) -> InstallSpec:
    """The requirement that installs the evalreg running now, as exactly as it can be named.

    Installed from a VCS URL: that repository at the commit pip checked out. From a wheel or
    sdist URL: that URL. From an index: ``evalreg==X.Y.Z``. From a local path or in
    editable mode nothing outside this machine holds the build, so the version pin is
    written with a warning: CI installs it only once that version is published.
    """
    pin = f"{_NAME}=={__version__}"
    try:
        dist = dist or metadata.distribution(_NAME)
        text = dist.read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    if text is None:
        return InstallSpec(pin)  # installed from an index, which serves it
    try:
        direct = json.loads(text)
        url = direct["url"]
    except (ValueError, KeyError, TypeError):
        return InstallSpec(pin, (_unpublished(pin, "from an unreadable direct_url.json"),))
    vcs = direct.get("vcs_info")
    spec = None
    if isinstance(vcs, dict) and vcs.get("commit_id") and not url.startswith("file:"):
        spec = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
        if direct.get("subdirectory"):
            spec += f"#subdirectory={direct['subdirectory']}"
    elif "archive_info" in direct and url.startswith(("https://", "http://")):
        spec = url
    if spec is not None:
        problem = install_spec_problem(spec)
        if problem is None:
            return InstallSpec(spec)
        return InstallSpec(pin, (_unpublished(pin, f"from {url} ({problem})"),))
    editable = (direct.get("dir_info") or {}).get("editable")
    return InstallSpec(
        pin, (_unpublished(pin, "in editable mode" if editable else "from a local path"),)
    )


def _unpublished(pin: str, how: str) -> str:
    return (
        f"this evalreg was installed {how}, so CI installs {pin!r}, which it cannot "
        "install until that version is published on the package index CI uses. Name a "
        "build CI can install with --evalreg-spec (git+https://host/org/evalreg@<commit>, "
        "or a wheel's URL), or publish this version."
    )


def with_remote_extra(spec: str, remote: str | None) -> InstallSpec:
    """``spec`` with the extra that brings DVC's plugin for ``remote`` (none for a path).

    ``evalreg==X`` becomes ``evalreg[s3]==X``, a URL ``evalreg[s3]@URL`` (PEP 508's direct
    reference, written without spaces so it stays one shell word) and a local path
    ``path[s3]``. A spec naming another distribution is kept, with a warning: its extras
    are not known here.
    """
    extra = remote_extra(remote) if remote else None
    if extra is None:
        return InstallSpec(spec)
    for pattern, join in ((_PINNED, ""), (_DIRECT, "@")):
        if match := pattern.match(spec):
            name = match["name"]
            if name.lower().replace("_", "-") != _NAME:
                why = f"it names {name!r}, not evalreg"
                return InstallSpec(spec, (_no_extra(spec, extra, why),))
            extras = _merged(match["extras"], extra)
            return InstallSpec(f"{name}[{extras}]{join}{match['rest']}")
    if "://" in spec:
        return InstallSpec(f"{_NAME}[{extra}]@{spec}")
    path = _PATH_EXTRAS.match(spec)
    assert path is not None  # the pattern matches any text
    wheel = Path(path["path"]).name
    if wheel.endswith((".whl", ".tar.gz", ".zip")) and not wheel.lower().startswith(_NAME):
        return InstallSpec(spec, (_no_extra(spec, extra, f"{wheel} is not an evalreg build"),))
    return InstallSpec(f"{path['path']}[{_merged(path['extras'], extra)}]")


def _merged(extras: str | None, extra: str) -> str:
    names = [e.strip() for e in (extras or "").split(",") if e.strip()]
    return ",".join(sorted({*names, extra}))


def _no_extra(spec: str, extra: str, why: str) -> str:
    return (
        f"--evalreg-spec {spec!r} was kept as given and CI installs no DVC plugin for the "
        f"remote: {why}, so evalreg cannot add the [{extra}] extra. Make sure the install "
        f"brings dvc-{extra} (`dvc pull` fails without it)."
    )

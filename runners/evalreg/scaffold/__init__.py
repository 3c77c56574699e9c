"""Scaffolding for ``evalreg init``: a new registry repository with a small working example."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from evalreg import dvcrepo
from evalreg.errors import UsageError
from evalreg.registry.schema import SCHEMA_VERSION, SETTINGS_FILE, install_spec_problem
from evalreg.report import reference
from evalreg.scaffold.install import InstallSpec, running_build, with_remote_extra

_RENAMES = {"gitignore": ".gitignore", "gitattributes": ".gitattributes", "github": ".github"}
EXAMPLE_EVALSET = "evalsets/faq-routing.jsonl"
# Where the template names the pip requirement for evalreg (workflows, settings, README).
SPEC_PLACEHOLDER = b"@EVALREG_SPEC@"


@dataclass(frozen=True)
class Scaffolded:
    root: Path
    remote: str
    evalreg_spec: str
    push_failed: str | None = None
    """Why the example eval set could not be pushed to the remote, or None."""
    warnings: tuple[str, ...] = ()
    """What the user should know about ``evalreg_spec`` (CI may not be able to install it)."""

    @property
    def exit_code(self) -> int:
        """1 when the example eval set is not on the remote yet (CI cannot read it)."""
        return 0 if self.push_failed is None else 1


def init_registry(
    target: Path,
    *,
    remote: str | None = None,
    evalreg_spec: str | None = None,
    snippets: bool = True,
) -> Scaffolded:
    """Create a registry repository at ``target``: git, DVC, layout, example, README.

    ``target`` must be absent or an empty directory. The example eval set is tracked by
    DVC and pushed to the remote (the team's, with ``remote``), so the new repository
    passes ``evalreg check`` and a fresh clone's ``dvc pull`` finds it. ``evalreg_spec``
    is the pip requirement CI installs evalreg from (default: the build running now, see
    ``install.running_build``); a remote in object storage adds the extra that brings its
    DVC plugin. The spec is validated before anything is written.
    Without ``snippets``, pull-request comments show no item text or model output.
    """
    if evalreg_spec is not None and (problem := install_spec_problem(evalreg_spec)):
        raise UsageError(f"--evalreg-spec: {problem}")
    build = running_build() if evalreg_spec is None else InstallSpec(evalreg_spec)
    install = with_remote_extra(build.spec, remote)
    spec = install.spec
    if (problem := install_spec_problem(spec)) is not None:
        raise UsageError(f"the install spec {spec!r} cannot be written: {problem}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty directory")
    import git

    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    try:
        git.Repo.init(root, initial_branch="main")
        template = resources.files("evalreg.scaffold") / "template"
        with resources.as_file(template) as source:
            for path in sorted(Path(source).rglob("*")):
                if path.is_dir() or "__pycache__" in path.parts:
                    continue
                rel = path.relative_to(source)
                if rel.parts[0] in _RENAMES:  # github/workflows/... -> .github/workflows/...
                    rel = Path(_RENAMES[rel.parts[0]], *rel.parts[1:])
                dest = root / rel.parent / _RENAMES.get(rel.name, rel.name)
                dest.parent.mkdir(parents=True, exist_ok=True)
                # The spec was validated above: it holds no quote, space or newline, so it
                # is safe inside the double-quoted YAML scalars and shell words it fills.
                dest.write_bytes(path.read_bytes().replace(SPEC_PLACEHOLDER, spec.encode()))
        # The schemas the template's YAML files point editors at, written by this version.
        reference.write(root)
        if not snippets:
            _settings_privacy(root / SETTINGS_FILE)
        where = dvcrepo.init(root, remote)
        dvcrepo.track(root, [EXAMPLE_EVALSET], push=False)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    # Pushed to the team's remote too, not only the in-repository one: the first CI run on
    # main pulls it. A remote not reachable from here keeps the scaffold; the caller says so.
    failed = dvcrepo.push(root, [EXAMPLE_EVALSET])
    if failed is None:  # staged like the pointer DVC staged: the in-repository remote's object
        dvcrepo.stage_objects(root, [EXAMPLE_EVALSET])
    # The build's warnings quote what CI installs: the spec with its remote's extra.
    named = tuple(w.replace(repr(build.spec), repr(spec)) for w in build.warnings)
    return Scaffolded(root, where, spec, failed, named + install.warnings)


def _settings_privacy(path: Path) -> None:
    """Turn snippets off in the settings file, creating it if the template has none."""
    text = (
        path.read_text(encoding="utf-8")
        if path.is_file()
        else f"schema_version: {SCHEMA_VERSION}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        text.rstrip("\n")
        + "\n# A public repository whose eval data stays private: no item text or model output\n"
        "# in pull-request comments.\nprivacy:\n  snippets: false\n",
        encoding="utf-8",
    )

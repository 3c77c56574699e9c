"""The package's import structure: layers in pipeline order, arrows one way, no cycles.

Every ``import`` of an evalreg module counts, wherever it is: at the top of a module,
inside a function, or under ``if TYPE_CHECKING:`` (a type names a dependency as surely
as a call does). ``LAYERS`` lists the package lowest first; a module may import only
from its own layer or a lower one, and no two modules may import each other, directly or
around a loop. ARCHITECTURE.md describes the same layout, and every module it names
must exist.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "runners"
PACKAGE = "evalreg"
TEMPLATE = "template"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "evalreg._version",
            "evalreg.registry.diagnostics",
            "evalreg.errors",
            "evalreg.canonical",
            "evalreg.forked",
            "evalreg.ignores",
            "evalreg.redaction",
            "evalreg.templating",
            "evalreg.dvclock",
            "evalreg.dvcrepo",
            "evalreg.stats",
            "evalreg.sequential",
            "evalreg.families",
            "evalreg.text",
        ),
    ),
    ("registry files", ("evalreg.registry",)),
    ("store", ("evalreg.store",)),
    ("providers", ("evalreg.providers", "evalreg.prompting")),
    ("eval sets", ("evalreg.evalsets",)),
    ("registry loading", ("evalreg.registry.loader", "evalreg.importers")),
    ("graders", ("evalreg.graders",)),
    ("cells", ("evalreg.cells",)),
    ("results", ("evalreg.results",)),
    ("metrics", ("evalreg.metrics", "evalreg.selection.stopping")),
    (
        "runner",
        (
            "evalreg.runner",
            "evalreg.store.purge",
            "evalreg.store.compaction",
            "evalreg.store.recovery",
        ),
    ),
    ("selection", ("evalreg.selection",)),
    ("compare", ("evalreg.compare",)),
    ("gitops and audit", ("evalreg.gitops", "evalreg.audit")),
    ("report", ("evalreg.report",)),
    (
        "commands",
        ("evalreg.check", "evalreg.gitops.merging", "evalreg.scaffold", "evalreg.report.terminal"),
    ),
    ("cli", ("evalreg.cli", "evalreg.__main__", "evalreg")),
]
"""Lowest first. An entry names a module or a package (then every module under it that a
longer entry does not claim)."""


def module_files(source: Path = SOURCE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((source / PACKAGE).rglob("*.py")):
        if TEMPLATE in path.parts:
            continue  # files ``evalreg init`` copies into a new repository, not modules
        parts = list(path.relative_to(source).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: Iterable[str]
) -> list[str]:
    known = set(known)
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".")
            if not is_package:
                base.pop()
            base = base[: len(base) - node.level + 1]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        # ``from pkg import mod`` imports the module; ``from mod import name``, the module.
        names = [
            f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names
        ]
    out = []
    for name in names:
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        out.append(name)
    return out


def import_graph(source: Path = SOURCE) -> dict[str, set[str]]:
    """Module → the evalreg modules it imports, anywhere in its text."""
    files = module_files(source)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets = graph.setdefault(module, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _imported(module, path.name == "__init__.py", node, files):
                    if target != module:
                        targets.add(target)
    return graph


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int:
    """The index of the layer of the longest entry naming ``module`` or a package of it."""
    best, best_len = -1, -1
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > best_len:
                best, best_len = index, len(entry)
    if best < 0:
        raise LookupError(f"{module} is in no layer: add it to LAYERS")
    return best


def upward_imports(
    graph: Mapping[str, Iterable[str]], layers: list[tuple[str, tuple[str, ...]]] = LAYERS
) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module, layers)
        for target in sorted(targets):
            theirs = layer_of(target, layers)
            if theirs > mine:
                out.append(f"{module} ({layers[mine][0]}) imports {target} ({layers[theirs][0]})")
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Each import cycle found by a depth-first search, as the modules around it."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                loop = path[path.index(target) :]
                if frozenset(loop) not in seen:
                    seen.add(frozenset(loop))
                    found.append([*loop, target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_every_module_is_in_a_layer() -> None:
    missing = []
    for module in module_files():
        try:
            layer_of(module)
        except LookupError as exc:
            missing.append(str(exc))
    assert missing == []


def test_every_layer_entry_names_a_module() -> None:
    modules = set(module_files())
    stale = [
        entry
        for _, entries in LAYERS
        for entry in entries
        if not any(m == entry or m.startswith(entry + ".") for m in modules)
    ]
    assert stale == []


def test_imports_run_down_the_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    """A synthetic package that breaks both rules, in each of the ways imports are written."""
    source = _write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "def f():\n    from evalreg import high\n",
            "high.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .mid import X\n"
            ),
            "mid.py": "import evalreg.high\nX = 1\n",
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from evalreg.pkg.a import thing\n",
        },
    )
    layers = [
        ("low", ("evalreg.low", "evalreg.pkg")),
        ("mid", ("evalreg.mid",)),
        ("high", ("evalreg.high", "evalreg")),
    ]
    graph = import_graph(source)
    assert graph["evalreg.low"] == {"evalreg.high"}
    assert graph["evalreg.high"] == {"evalreg.mid"}
    assert upward_imports(graph, layers) == [
        "evalreg.low (low) imports evalreg.high (high)",
        "evalreg.mid (mid) imports evalreg.high (high)",
    ]
    assert sorted(sorted(c) for c in cycles(graph)) == [
        ["evalreg.high", "evalreg.high", "evalreg.mid"],
        ["evalreg.pkg.a", "evalreg.pkg.a", "evalreg.pkg.b"],
    ]
    with pytest.raises(LookupError, match=r"evalreg\.stray is in no layer"):
        layer_of("evalreg.stray", layers[:2])


def layout_names(text: str) -> list[str]:
    """The paths ARCHITECTURE.md's layout names: each top-level ``module.py`` and
    ``package/``, and each module a package's description lists (comma-separated names,
    parenthesised remarks aside)."""
    layout = text.split("```text\n", 1)[1].split("```", 1)[0]
    out: list[str] = []
    package = None
    for line in layout.splitlines()[1:]:
        top = re.match(r"^  ([a-z_]+(?:/|\.py))\s*(.*)$", line)
        if top:
            name, rest = top.groups()
            out.append(name.rstrip("/"))
            package = name.rstrip("/") if name.endswith("/") else None
        elif package is None:
            continue
        else:
            rest = line
        if package is None:
            continue
        for token in re.sub(r"\([^)]*\)", "", rest).split(","):
            token = token.strip(" ;:")
            if re.fullmatch(r"_?[a-z][a-z0-9_]*", token):
                out.append(f"{package}/{token}")
    return out


def test_architecture_md_names_only_modules_that_exist() -> None:
    names = layout_names((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert len(names) >= 60, names
    root = SOURCE / PACKAGE
    missing = [
        name
        for name in names
        if not (root / name).exists()
        and not (root / f"{name}.py").exists()
        and not (root / name).with_suffix("").is_dir()
    ]
    assert missing == []


def test_layout_names_reads_packages_and_their_modules() -> None:
    text = "```text\nroot/\n  cells.py   Cell (a, b)\n  store/     segments (x, y), lock;\n"
    text += "             purge\n  cli.py     parse, call\n```\n"
    assert layout_names(text) == [
        "cells.py",
        "store",
        "store/segments",
        "store/lock",
        "store/purge",
        "cli.py",
    ]


def test_the_facade_exports_what_its_docstring_lists() -> None:
    """``evalreg``'s docstring lists ``name(...)`` or ``name`` items; ``__all__`` is exactly
    them, each resolves to its home, and importing the package loads none of the pipeline."""
    code = (
        "import sys, evalreg\n"
        "print(sorted(m for m in sys.modules if m.startswith('evalreg')))\n"
        "print(evalreg.__all__)\n"
        "print(evalreg.__doc__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded, exported, doc = out.split("\n", 2)
    assert loaded == "['evalreg', 'evalreg._version']"
    listed = re.findall(r"^- ``(\w+)", doc, re.M)
    assert sorted(listed) == sorted(ast.literal_eval(exported))
    import evalreg

    for name in listed:
        assert getattr(evalreg, name) is not None
    assert {"load_registry", "run", "reproduce", "diff", "write_report"} <= set(listed)
    with pytest.raises(AttributeError):
        _ = evalreg.not_a_name  # type: ignore[attr-defined]


def test_no_function_imports_again_what_its_module_imports_at_the_top() -> None:
    """A function-level import is for start-up time (ARCHITECTURE.md): one from a module
    the module already imports at its top loads nothing new, saves nothing and misleads
    the reader (``from pkg import submodule`` imports the submodule, not only ``pkg``)."""
    files = module_files()
    again = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        top = {
            loaded
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            for loaded in _loaded(node, files)
        }
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    again += [
                        f"{module}:{node.lineno} {m}" for m in _loaded(node, files) if m in top
                    ]
    assert again == []


def _loaded(node: ast.Import | ast.ImportFrom, known: Iterable[str]) -> list[str]:
    """The modules an absolute import statement loads (none for a relative one): each
    ``import``ed module, or the ``from`` module, or for a name that is its submodule, that."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level or node.module is None:
        return []
    out = []
    for alias in node.names:
        submodule = f"{node.module}.{alias.name}"
        out.append(submodule if submodule in known else node.module)
    return out


MAX_FUNCTION_LINES = 150
"""Longer than this, a function holds several steps a reader must keep apart in their head:
each becomes a function (or a method of a small class) with a name that says what it does."""


def test_no_function_is_longer_than_150_lines() -> None:
    """Every function and method of the package, nested ones and the files ``evalreg init``
    copies included, counted from its ``def`` to its last line."""
    long = []
    for path in sorted((SOURCE / PACKAGE).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    where = path.relative_to(SOURCE).as_posix()
                    long.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []

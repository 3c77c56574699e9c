"""Eval sets on DVC: adding, reading through the cache and remote, and reading any revision."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.errors import RegistryError, UsageError
from evalreg.registry.loader import load_registry
from evalreg.registry.tree import GitTree

from conftest import Repo, assert_refused, items_jsonl

EVALSET = "evalsets/messages.jsonl"


@pytest.fixture
def dvc_repo(repo: Repo, cli) -> Repo:
    """The standard registry with DVC initialised and its eval set tracked by DVC."""
    repo.git("rm", "-q", "--cached", EVALSET)
    dvcrepo.init(repo.root, remote=None)
    result = cli(repo, "evalset", "add", str(repo.root / EVALSET))
    assert result.code == 0, result.err
    repo.commit("track the eval set with DVC")
    return repo


def test_evalset_add_tracks_with_dvc_and_pushes(dvc_repo: Repo, cli):
    pointer = dvc_repo.read(EVALSET + ".dvc")
    md5 = dvcrepo.pointer_md5(pointer.encode())
    assert md5 is not None
    assert dvc_repo.git("ls-files", EVALSET) == ""
    assert dvc_repo.git("ls-files", EVALSET + ".dvc").strip() == EVALSET + ".dvc"
    pushed = dvc_repo.root / "dvc-storage" / "files" / "md5" / md5[:2] / md5[2:]
    assert pushed.read_bytes() == (dvc_repo.root / EVALSET).read_bytes()
    result = cli(dvc_repo, "check")
    assert result.code == 0, result.err
    assert "not tracked by DVC" not in result.err


def test_evalset_add_rejects_an_invalid_file_and_writes_nothing(dvc_repo: Repo, cli):
    dvc_repo.write("evalsets/new.jsonl", '{"id": "a", "input": {}}\n{"id": "a", "input": {}}\n')
    before = dvc_repo.snapshot()
    result = cli(dvc_repo, "evalset", "add", str(dvc_repo.root / "evalsets/new.jsonl"))
    assert result.code == 2
    assert "evalsets/new.jsonl:2: duplicate item id 'a' (first at line 1)" in result.err
    assert dvc_repo.snapshot() == before


def test_evalset_add_refuses_a_file_git_already_tracks(repo: Repo, cli):
    dvcrepo.init(repo.root, remote=None)
    result = cli(repo, "evalset", "add", str(repo.root / EVALSET))
    assert result.code == 2
    assert f"git rm --cached {EVALSET}" in result.err


def test_evalset_add_refuses_a_file_outside_the_repository(dvc_repo: Repo, cli, tmp_path: Path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(items_jsonl())
    result = cli(dvc_repo, "evalset", "add", str(outside))
    assert result.code == 2
    assert "is not inside the repository" in result.err


def test_loading_reads_through_the_cache_when_the_workspace_lacks_the_file(dvc_repo: Repo, cli):
    (dvc_repo.root / EVALSET).unlink()
    registry = load_registry(dvc_repo.root)
    assert [i.id for i in registry.evalset_of("labels").items] == [
        "m-000",
        "m-001",
        "m-002",
        "m-003",
    ]


def test_loading_fetches_from_the_remote_when_the_cache_lacks_it(dvc_repo: Repo):
    (dvc_repo.root / EVALSET).unlink()
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    registry = load_registry(dvc_repo.root)
    assert len(registry.evalset_of("labels").items) == 4


def test_a_remote_on_this_machine_is_read_without_starting_dvc(dvc_repo: Repo):
    # A fresh clone: no working copy, no cache; the remote is a directory beside it.
    (dvc_repo.root / EVALSET).unlink()
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    code = (
        "import sys; from evalreg.registry.loader import load_registry; "
        "r = load_registry(sys.argv[1]); "
        "print(len(r.evalset_of('labels').items), "
        "any(m.split('.')[0] == 'dvc' for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(dvc_repo.root)], capture_output=True, text=True
    )
    assert done.stdout.split() == ["4", "False"], done.stderr


def test_a_damaged_copy_on_the_local_remote_is_not_read(dvc_repo: Repo, cli):
    (dvc_repo.root / EVALSET).unlink()
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    md5 = dvcrepo.pointer_md5((dvc_repo.root / (EVALSET + ".dvc")).read_bytes())
    assert md5 is not None
    copy = dvc_repo.root / "dvc-storage" / "files" / "md5" / md5[:2] / md5[2:]
    copy.write_bytes(copy.read_bytes().replace(b"m-000", b"m-999"))
    result = cli(dvc_repo, "check")
    # Not taken as the eval set: DVC's own read gets the same bytes, which the pointer refuses.
    assert result.code == 2
    assert f"{EVALSET}: differs from the version DVC tracks" in result.err


def test_the_local_remote_is_the_one_config_local_names(dvc_repo: Repo, tmp_path: Path):
    (dvc_repo.root / EVALSET).unlink()
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    moved = tmp_path / "elsewhere"
    shutil.move(dvc_repo.root / "dvc-storage", moved)
    (dvc_repo.root / ".dvc" / "config.local").write_text(
        f"['remote \"storage\"']\n    url = {moved}\n"
    )
    registry = load_registry(dvc_repo.root)
    assert len(registry.evalset_of("labels").items) == 4


def test_the_local_remote_follows_an_edit_of_the_config(dvc_repo: Repo, tmp_path: Path):
    # Asked for every tracked file read, the answer is kept only while the config is unchanged.
    root = dvc_repo.root
    assert dvcrepo._local_remote(root) == (root / "dvc-storage").resolve()
    config = root / ".dvc" / "config"
    config.write_text(config.read_text().replace("../dvc-storage", str(tmp_path)))
    assert dvcrepo._local_remote(root) == tmp_path.resolve()
    (root / ".dvc" / "config.local").write_text("['remote \"storage\"']\n    url = s3://b/x\n")
    assert dvcrepo._local_remote(root) is None


def test_data_missing_everywhere_says_how_to_fetch_it(dvc_repo: Repo, cli):
    (dvc_repo.root / EVALSET).unlink()
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    shutil.rmtree(dvc_repo.root / "dvc-storage")
    result = cli(dvc_repo, "run", "--offline")
    assert result.code == 2
    assert "registry/tasks/labels.yaml:3:10: evalsets/messages.jsonl (md5 " in result.err
    assert "is in neither the working tree, the DVC cache nor the remote 'storage'" in result.err
    assert f"`dvc pull {EVALSET}.dvc`" in result.err
    assert "Traceback" not in result.err


def test_check_still_validates_what_it_can_without_the_data(dvc_repo: Repo, cli):
    # A fork's pull request cannot read the team's remote: it still gets validation.
    (dvc_repo.root / EVALSET).unlink()
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    shutil.rmtree(dvc_repo.root / "dvc-storage")
    result = cli(dvc_repo, "check")
    assert result.code == 0, result.err
    assert "registry/tasks/labels.yaml:3:10: warning: not checked here:" in result.err
    assert "eval data is not available here" in result.err
    dvc_repo.write("registry/models/mini.yaml", "schema_version: 1\nprovider: nope\n")
    assert cli(dvc_repo, "check").code == 2


@pytest.mark.parametrize("command", ["check", "run", "status"])
def test_an_edited_evalset_not_yet_recorded_is_refused(dvc_repo: Repo, cli, command):
    # Results would name a version of the eval set that no revision can read back.
    with (dvc_repo.root / EVALSET).open("a") as f:
        f.write(json.dumps({"id": "m-new", "input": {"text": "x"}, "tags": ["common"]}) + "\n")
    assert_refused(
        dvc_repo,
        cli,
        command,
        expect=(
            f"{EVALSET}: differs from the version DVC tracks ({EVALSET}.dvc says md5 ",
            f"run `evalreg evalset add {EVALSET}` to record the change, or "
            f"`dvc checkout {EVALSET}.dvc` to undo it",
        ),
    )


def test_a_pointer_that_records_no_md5_is_refused(dvc_repo: Repo, cli):
    dvc_repo.write(EVALSET + ".dvc", "outs:\n- path: messages.jsonl\n")
    dvc_repo.commit("a damaged pointer")
    assert_refused(
        dvc_repo,
        cli,
        "check",
        expect=(f"{EVALSET}.dvc: not a single-file DVC pointer with an md5: restore it",),
    )


def test_the_pointers_dvc_wrote_are_read_without_parsing_yaml(monkeypatch):
    root = Path(__file__).resolve().parent.parent
    listed = subprocess.run(
        ["git", "ls-files", "*.dvc"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    pointers = {rel: (root / rel).read_bytes() for rel in listed}
    assert len(pointers) > 20  # eval sets, attachments, per-item records, store segments
    expected = {rel: dvcrepo._parsed_pointer_md5(data) for rel, data in pointers.items()}
    monkeypatch.setattr(dvcrepo, "_parsed_pointer_md5", lambda data: pytest.fail("parsed"))
    assert {rel: dvcrepo.pointer_md5(data) for rel, data in pointers.items()} == expected
    assert None not in expected.values()


POINTER_VALUES = (
    *("810", "0", "007", "9" * 18, "9" * 19, "md5", "null", "True", "~", "yes", "inv-009.pdf"),
    *("_x.y-z", "20261130T084212Z-run-ea43f0b4.jsonl", "2026-11-30", "2026-13-45", "1e5"),
    *("1.5", ".inf", "._", "0b_", "0x_", "0o7", "9-n", "12e5j", "a b", "'q'", "x: y", "[1", "#"),
)


def test_a_pointer_is_read_as_yaml_reads_it_whatever_its_shape():
    """The pattern that reads DVC's own pointers gives YAML's answer on everything it
    takes: numbers, dates, duplicate keys, md5s that YAML reads as a number."""
    rng = random.Random(23)
    keys = ("size", "hash", "path", "md5", "cloud", "size")
    md5s = ("0" * 31 + "a", "1234e678" * 4, "1" * 32, "e" * 32, "ABCDEF01" * 4, "ab" * 15)
    for _ in range(4000):
        md5 = rng.choice(md5s) if rng.random() < 0.3 else f"{rng.getrandbits(128):032x}"
        lines = [
            f"  {k}: {rng.choice(POINTER_VALUES)}" for k in rng.sample(keys, rng.randint(0, 4))
        ]
        head = rng.choice(
            ("outs:\n- md5: ", "outs:\n-  md5: ", "outs:\n- md5: ", "meta: 1\nouts:\n- md5: ")
        )
        data = (head + md5 + "\n" + "".join(f"{line}\n" for line in lines)).encode()
        try:
            expected: object = dvcrepo._parsed_pointer_md5(data)
        except ValueError as exc:  # a date YAML cannot build: raised by both
            expected = type(exc)
        try:
            got: object = dvcrepo.pointer_md5(data)
        except ValueError as exc:
            got = type(exc)
        assert got == expected, data


def test_reproduce_says_the_working_tree_holds_another_version(dvc_repo: Repo, cli):
    pointer = dvc_repo.read(EVALSET + ".dvc")
    md5 = dvcrepo.pointer_md5(pointer.encode())
    assert md5 is not None
    never = "0123456789abcdef" * 2
    dvc_repo.write(EVALSET + ".dvc", pointer.replace(md5, never))
    dvc_repo.commit("a pointer to a version that was never pushed")
    assert_refused(
        dvc_repo,
        cli,
        "reproduce",
        "HEAD",
        expect=(
            f"{EVALSET} (md5 {never}) is in neither the DVC cache nor the remote 'storage'",
            f"and the working tree holds another version of it (md5 {md5})",
            f"`dvc pull {EVALSET}.dvc`",
        ),
    )


def test_any_revision_reads_back_exactly(dvc_repo: Repo, cli):
    revs = {}
    revs["first"] = dvc_repo.git("rev-parse", "HEAD").strip()
    first_bytes = (dvc_repo.root / EVALSET).read_bytes()

    dvc_repo.write(
        "registry/models/mini.yaml",
        dvc_repo.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.7"),
    )
    revs["pin"] = dvc_repo.commit("warmer pin")

    dvc_repo.write(EVALSET, items_jsonl(6))
    assert cli(dvc_repo, "evalset", "add", str(dvc_repo.root / EVALSET)).code == 0
    revs["data"] = dvc_repo.commit("two more items")
    last_bytes = (dvc_repo.root / EVALSET).read_bytes()

    before = dvc_repo.snapshot()
    expected = {
        "first": (0, first_bytes),
        "pin": (0.7, first_bytes),
        "data": (0.7, last_bytes),
    }
    for name, rev in revs.items():
        registry = load_registry(GitTree(dvc_repo.root, rev))
        temperature, data = expected[name]
        assert registry.pins["mini"].params["temperature"] == temperature, name
        evalset = registry.evalset_of("labels")
        assert evalset.md5 == dvcrepo.hashlib.md5(data).hexdigest(), name
        assert len(evalset.items) == data.count(b"\n"), name
    # Reading old revisions neither checks them out nor changes any file.
    assert dvc_repo.snapshot() == before
    assert dvc_repo.git("status", "--porcelain") == ""


def test_an_old_revision_reads_from_the_remote_after_the_cache_is_gone(dvc_repo: Repo, cli):
    first = dvc_repo.git("rev-parse", "HEAD").strip()
    dvc_repo.write(EVALSET, items_jsonl(7))
    assert cli(dvc_repo, "evalset", "add", str(dvc_repo.root / EVALSET)).code == 0
    dvc_repo.commit("more items")
    shutil.rmtree(dvc_repo.root / ".dvc" / "cache")
    registry = load_registry(GitTree(dvc_repo.root, first))
    assert len(registry.evalset_of("labels").items) == 4


def test_errors_at_a_revision_name_the_file(dvc_repo: Repo):
    dvc_repo.write("registry/tasks/labels.yaml", "schema_version: 1\nrubric: [\n")
    bad = dvc_repo.commit("broken task")
    with pytest.raises(RegistryError) as caught:
        load_registry(GitTree(dvc_repo.root, bad))
    assert caught.value.findings[0].render().startswith("registry/tasks/labels.yaml:3:1: YAML")


def test_unknown_revision_is_a_usage_error(dvc_repo: Repo):
    with pytest.raises(UsageError, match="unknown revision 'no-such-branch'"):
        GitTree(dvc_repo.root, "no-such-branch")


def test_items_hold_exactly_what_json_reads_from_their_lines():
    """Lines are read by a faster parser where it agrees with ``json``; where it does not
    (numbers beyond 64 bits), ``json`` reads them."""
    from evalreg.evalsets.evalset import parse_evalset

    lines = [
        '{"id": "b", "input": {"x": 123456789012345678901234, "y": -9223372036854775809}}',
        '{"id": "d", "input": {"x": 1.7e308, "y": -0.0, "z": 1e-7}}',
        '{"id": "e", "input": {"x": 1, "x": 2}}',
        '  {"id": "f", "input": {"x": 1.5, "y": "caf\\u00e9 \\ud83d\\ude00"}}\r',
    ]
    evalset, findings = parse_evalset("\n".join(lines).encode(), "e.jsonl")
    assert findings == [] and evalset is not None
    for item, line in zip(evalset.items, lines, strict=True):
        want = json.loads(line)["input"]
        assert repr(item.input) == repr(want)
        assert [type(v) for v in item.input.values()] == [type(v) for v in want.values()]


def test_only_the_lines_holding_a_long_number_are_left_to_json(monkeypatch):
    """A run of 19 digits in one item does not send the whole file to ``json``."""
    from evalreg.evalsets import evalset as module

    read_by_json: list[str] = []
    reference = module.loads_finite

    def counted(line: str) -> object:
        read_by_json.append(line)
        return reference(line)

    monkeypatch.setattr(module, "loads_finite", counted)
    lines = [
        '{"id": "long", "input": {"x": 12345678901234567890123}}',
        '{"id": "short", "input": {"x": 12}}',
    ]
    evalset, findings = module.parse_evalset("\n".join(lines).encode(), "long-numbers.jsonl")
    assert findings == [] and evalset is not None
    assert [item.input for item in evalset.items] == [{"x": 12345678901234567890123}, {"x": 12}]
    assert read_by_json == [lines[0]]


# ---------------------------------------------------------------- replacing a tracked set
def items(ids: list[str], *, label: str = "a") -> str:
    rows = [
        {"id": i, "input": {"text": i}, "expected": {"label": label}, "tags": ["common"]}
        for i in ids
    ]
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


@pytest.fixture
def tracked(dvc_repo: Repo, cli) -> Repo:
    """``evalsets/messages.jsonl`` tracked with seven items m-0 .. m-6."""
    dvc_repo.write(EVALSET, items([f"m-{i}" for i in range(7)]))
    result = cli(dvc_repo, "evalset", "add", str(dvc_repo.root / EVALSET), "--replace")
    assert result.code == 0, result.err
    dvc_repo.commit("seven items")
    return dvc_repo


def test_evalset_add_refuses_content_that_drops_items_and_shows_the_changes(tracked, cli):
    kept = [f"m-{i}" for i in range(6) if i != 0]
    tracked.write(EVALSET, items(kept[:-1]) + items(kept[-1:], label="b") + items(["n-1"]))
    err = assert_refused(
        tracked,
        cli,
        "evalset",
        "add",
        str(tracked.root / EVALSET),
        expect=(
            f"{EVALSET}: the new content drops 2 of the 7 items of the recorded version",
            "added: 1 ('n-1')",
            "removed: 2 ('m-0', 'm-6')",
            "changed (same id, other content): 1 ('m-5')",
            f"evalreg evalset add {EVALSET} --replace",
        ),
    )
    assert "m-1" not in err


def test_evalset_add_lists_the_first_ids_and_counts_the_rest(tracked, cli):
    tracked.write(EVALSET, items(["m-6"]))
    assert_refused(
        tracked,
        cli,
        "evalset",
        "add",
        str(tracked.root / EVALSET),
        expect=("removed: 6 ('m-0', 'm-1', 'm-2', 'm-3', 'm-4' and 1 more)",),
    )


def test_evalset_add_replace_drops_items_and_says_what_changed(tracked, cli):
    tracked.write(EVALSET, items(["m-0", "m-1"]))
    result = cli(tracked, "evalset", "add", str(tracked.root / EVALSET), "--replace")
    assert result.code == 0, result.err
    assert "removed: 5 ('m-2', 'm-3', 'm-4', 'm-5', 'm-6')" in result.out
    md5 = dvcrepo.pointer_md5((tracked.root / f"{EVALSET}.dvc").read_bytes())
    assert md5 == hashlib.md5((tracked.root / EVALSET).read_bytes()).hexdigest()


def test_evalset_add_that_only_adds_or_changes_items_needs_no_replace(tracked, cli):
    tracked.write(EVALSET, items([f"m-{i}" for i in range(7)], label="b") + items(["n-1"]))
    result = cli(tracked, "evalset", "add", str(tracked.root / EVALSET))
    assert result.code == 0, result.err
    assert "added: 1 ('n-1')" in result.out
    assert "changed (same id, other content): 7 (" in result.out


def test_evalset_add_refuses_when_the_recorded_version_was_not_pulled(tracked, cli):
    """A fresh clone without ``dvc pull``: the old version is not here, the file is new."""
    shutil.rmtree(tracked.root / ".dvc" / "cache")
    tracked.write(EVALSET, items(["x-1"]))
    assert_refused(
        tracked,
        cli,
        "evalset",
        "add",
        str(tracked.root / EVALSET),
        expect=(
            "which is not in the local DVC cache, so what the new content removes or changes "
            "cannot be shown",
            f"`dvc fetch {EVALSET}.dvc`",
            "--replace",
        ),
    )
    result = cli(tracked, "evalset", "add", str(tracked.root / EVALSET), "--replace")
    assert result.code == 0, result.err
    assert len(load_registry(tracked.root).evalset_of("labels").items) == 1


def test_evalset_add_of_unchanged_content_succeeds_without_the_cache(tracked, cli):
    shutil.rmtree(tracked.root / ".dvc" / "cache")
    result = cli(tracked, "evalset", "add", str(tracked.root / EVALSET), "--no-push")
    assert result.code == 0, result.err

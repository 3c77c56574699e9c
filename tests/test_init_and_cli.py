"""``evalreg init`` scaffolds a working registry; the CLI's exit codes, JSON and error paths."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Repo

WITHOUT_GS_PLUGIN = pytest.mark.skipif(
    importlib.util.find_spec("dvc_gs") is not None,
    reason="DVC's GCS plugin is installed (nox's lowest and latest sessions install every extra)",
)
"""For a test of what a command says when a remote's DVC plugin is missing."""


def test_init_scaffolds_a_registry_that_passes_check(tmp_path: Path, cli):
    target = tmp_path / "team-registry"
    result = cli(None, "init", str(target))
    assert result.code == 0, result.err
    for rel in (
        ".git",
        ".dvc/config",
        "registry/models",
        "registry/tasks",
        "registry/rubrics",
        "registry/selections",
        "evalsets/faq-routing.jsonl.dvc",
        "reports",
        "README.md",
        ".gitattributes",
        ".github/workflows/evalreg-pr.yml",
        ".github/workflows/evalreg-comment.yml",
        ".github/workflows/evalreg-main.yml",
    ):
        assert (target / rel).exists(), rel
    # The example eval set is tracked by DVC, not by git, and pushed to the in-repo remote.
    ignored = (target / "evalsets/.gitignore").read_text()
    assert "/faq-routing.jsonl" in ignored
    assert any((target / "dvc-storage").rglob("*")), "nothing pushed to the in-repo remote"
    config = (target / ".dvc/config").read_text()
    assert "url = ../dvc-storage" in config

    checked = cli(target, "check")
    assert checked.code == 0, checked.err
    # Nothing has run yet: its cells are pending, a warning that --strict turns into a failure.
    assert "cell faq-routing/keyword-router is pending (never run)" in checked.err
    assert cli(target, "check", "--strict").code == 1
    assert "faq-routing" in checked.out


def _commit(root: Path, message: str) -> None:
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], cwd=root, check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", message], cwd=root, check=True, capture_output=True)


def test_the_scaffold_passes_its_own_next_steps(tmp_path: Path, cli):
    """What a new user does first: init, commit, run, report, commit; check stays green."""
    target = tmp_path / "r"
    assert cli(None, "init", str(target)).code == 0
    _commit(target, "Start an eval registry")
    ran = cli(target, "run")
    # The baseline runs here; the hosted model's cell stays pending, and the run fails
    # naming the key it needs, since nothing was bought for it.
    assert ran.code == 1
    assert "faq-routing/gpt-4o-mini cannot run: OPENAI_API_KEY is not set" in ran.err
    assert (target / "reports/results/faq-routing/keyword-router.json").is_file()
    assert cli(target, "report").code == 0
    _commit(target, "First results")

    checked = cli(target, "check")

    assert checked.code == 0, checked.err
    assert "finding" not in checked.err.replace("0 findings", "")


def test_a_waiver_finding_names_the_command_that_records_it(tmp_path: Path, cli):
    target = tmp_path / "r"
    assert cli(None, "init", str(target)).code == 0
    selection = target / "registry/selections/faq-routing.yaml"
    selection.write_text(selection.read_text().replace("min: 0.7", "min: 0.8"))
    _commit(target, "a stricter bar")
    assert cli(target, "run", "--allow-pending").code == 0  # no key for the hosted model
    assert cli(target, "report").code == 0
    _commit(target, "results")

    checked = cli(target, "check")

    assert checked.code == 1
    assert "check: findings (0 errors, 1 finding, 1 warning)" in checked.out
    command = "evalreg select faq-routing keyword-router --reason '…' --approver '…'"
    assert f"`{command}` records a waiver for it" in checked.err
    # Doing what it says clears the finding.
    waived = cli(
        target,
        "select",
        "faq-routing",
        "keyword-router",
        "--reason",
        "Today's rules until a model has been evaluated",
        "--approver",
        "Dana Reyes",
    )
    assert waived.code == 0, waived.err
    assert cli(target, "report").code == 0
    _commit(target, "waiver")
    assert cli(target, "check").code == 0


@WITHOUT_GS_PLUGIN
def test_init_with_a_remote_url_configures_it(tmp_path: Path, cli):
    target = tmp_path / "r"
    # DVC's GCS plugin is not installed here (the test extra brings only the S3 one).
    result = cli(None, "init", str(target), "--remote", "gs://team-bucket/evalreg")
    # The bucket cannot be reached from here: the scaffold stays, and init says what to do.
    assert result.code == 1, result.err
    assert "the example eval set was not pushed to gs://team-bucket/evalreg" in result.err
    assert "pip install 'evalreg[gs]'" in result.err
    assert "dvc push" in result.out
    assert "url = gs://team-bucket/evalreg" in (target / ".dvc/config").read_text()
    assert not (target / "dvc-storage").exists()


@pytest.mark.parametrize(
    ("remote", "spec", "written"),
    [
        ("gs://team-bucket/evalreg", "evalreg==0.1.0", "evalreg[gs]==0.1.0"),
        ("azure://container/evalreg", "evalreg[aws]==0.1.0", "evalreg[aws,azure]==0.1.0"),
        (
            "s3://team-bucket/evalreg",
            "git+https://github.com/acme/evalreg@0123456789abcdef0123456789abcdef01234567",
            "evalreg[s3]@git+https://github.com/acme/evalreg@0123456789abcdef0123456789abcdef01234567",
        ),
        (
            "gs://b/e",
            "/wheels/evalreg-0.1.0-py3-none-any.whl",
            "/wheels/evalreg-0.1.0-py3-none-any.whl[gs]",
        ),
    ],
)
def test_init_with_an_object_storage_remote_installs_its_dvc_plugin_in_ci(
    remote: str, spec: str, written: str, tmp_path: Path, cli
):
    from evalreg.registry.schema import install_spec_problem

    target = tmp_path / "r"
    result = cli(None, "init", str(target), f"--remote={remote}", f"--evalreg-spec={spec}")
    assert result.code in (0, 1), result.err  # 1: the bucket cannot be reached from here
    assert install_spec_problem(written) is None
    assert f'install: "{written}"' in (target / "registry/evalreg.yaml").read_text()
    workflows = sorted((target / ".github/workflows").glob("*.yml"))
    assert len(workflows) == 5
    for workflow in workflows:
        assert f'EVALREG_SPEC: "{written}"' in workflow.read_text(), workflow.name
    assert f"python -m pip install '{written}'" in (target / "README.md").read_text()


def test_init_keeps_a_spec_for_another_distribution_and_says_it_adds_no_plugin(tmp_path: Path, cli):
    target = tmp_path / "r"
    result = cli(None, "init", str(target), "--remote=gs://b/e", "--evalreg-spec=acme-evalreg==2.0")
    assert (
        'EVALREG_SPEC: "acme-evalreg==2.0"'
        in (target / ".github/workflows/evalreg-pr.yml").read_text()
    )
    assert "cannot add the [gs] extra" in result.err
    assert "dvc-gs" in result.err


@WITHOUT_GS_PLUGIN
def test_commands_that_need_a_remote_without_its_plugin_name_the_extra(tmp_path: Path, cli):
    target = tmp_path / "r"
    assert cli(None, "init", str(target)).code == 0
    _commit(target, "Start an eval registry")
    config = target / ".dvc/config"
    config.write_text(config.read_text().replace("../dvc-storage", "gs://team-bucket/evalreg"))
    (target / "dvc-storage").rename(tmp_path / "elsewhere")  # nothing read from beside it

    checked = cli(target, "check", "--remote")
    assert checked.code == 2, checked.out + checked.err
    assert "pip install 'evalreg[gs]'" in checked.err
    # A run stops before it buys what it could not push.
    ran = cli(target, "run")
    assert ran.code == 2, ran.out + ran.err
    assert "pip install 'evalreg[gs]'" in ran.err
    assert not list((target / "reports").rglob("*.jsonl"))


def test_init_with_a_remote_pushes_the_example_so_a_fresh_clone_can_pull_it(tmp_path: Path, cli):
    remote, target, clone = tmp_path / "team-remote", tmp_path / "r", tmp_path / "clone"
    result = cli(None, "init", str(target), "--remote", str(remote))
    assert result.code == 0, result.err
    assert any(p.is_file() for p in remote.rglob("*")), "nothing pushed to the team's remote"
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], cwd=target, check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=target, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", str(target), str(clone)], check=True)
    # What CI on main does first: a clone has the pointer, not the data, until it pulls.
    assert not (clone / "evalsets/faq-routing.jsonl").exists()
    pulled = subprocess.run(
        [str(Path(sys.executable).parent / "dvc"), "pull"],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert (clone / "evalsets/faq-routing.jsonl").read_bytes() == (
        target / "evalsets/faq-routing.jsonl"
    ).read_bytes()
    assert cli(clone, "check").code == 0


def test_init_pins_the_evalreg_ci_installs_to_this_version_by_default(tmp_path: Path, cli):
    from evalreg import __version__

    target = tmp_path / "r"
    assert cli(None, "init", str(target)).code == 0
    spec = f"evalreg=={__version__}"
    assert f'install: "{spec}"' in (target / "registry/evalreg.yaml").read_text()
    for workflow in sorted((target / ".github/workflows").glob("*.yml")):
        text = workflow.read_text()
        assert f'EVALREG_SPEC: "{spec}"' in text, workflow.name
        assert "@EVALREG_SPEC@" not in text and "pip install evalreg\n" not in text
    assert f"python -m pip install '{spec}'" in (target / "README.md").read_text()


def test_init_from_an_editable_install_warns_that_ci_cannot_install_it_yet(tmp_path: Path, cli):
    # This checkout is installed in editable mode: no index serves what is running.
    result = cli(None, "init", str(tmp_path / "r"))
    assert result.code == 0, result.err
    assert "installed in editable mode" in result.err
    assert "--evalreg-spec" in result.err
    assert "until that version is published" in result.err


def test_the_editable_install_warning_names_what_ci_installs_with_the_remotes_extra(
    tmp_path: Path, cli
):
    result = cli(None, "init", str(tmp_path / "r"), "--remote", "s3://bucket/evalreg")
    assert result.code in (0, 1), result.err  # 1: the bucket cannot be reached from here
    assert "so CI installs 'evalreg[s3]==" in result.err


def _installed(tmp_path: Path, direct_url: dict[str, object]):
    from importlib import metadata

    info = tmp_path / "evalreg-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evalreg\nVersion: 0.1.0\n")
    (info / "direct_url.json").write_text(json.dumps(direct_url))
    return metadata.PathDistribution(info)


def test_an_evalreg_installed_from_git_is_pinned_at_its_commit(tmp_path: Path):
    from evalreg.scaffold.install import running_build

    sha = "0123456789abcdef0123456789abcdef01234567"
    dist = _installed(
        tmp_path,
        {
            "url": "https://github.com/acme/evalreg.git",
            "vcs_info": {"vcs": "git", "commit_id": sha},
        },
    )
    assert running_build(dist).spec == f"git+https://github.com/acme/evalreg.git@{sha}"
    assert running_build(dist).warnings == ()


@pytest.mark.parametrize(
    ("direct_url", "how"),
    [
        ({"url": "file:///home/dana/evalreg", "dir_info": {"editable": True}}, "editable mode"),
        ({"url": "file:///home/dana/evalreg", "dir_info": {}}, "from a local path"),
        (
            {
                "url": "file:///home/dana/evalreg",
                "vcs_info": {"vcs": "git", "commit_id": "ab" * 20},
            },
            "from a local path",
        ),
    ],
)
def test_an_evalreg_installed_from_this_machine_is_pinned_by_version_with_a_warning(
    direct_url: dict[str, object], how: str, tmp_path: Path
):
    from evalreg.scaffold.install import running_build

    build = running_build(_installed(tmp_path, direct_url))
    assert build.spec == "evalreg==0.1.0"
    (warning,) = build.warnings
    assert how in warning and "--evalreg-spec" in warning


def test_init_writes_the_evalreg_spec_it_is_given(tmp_path: Path, cli):
    target = tmp_path / "r"
    spec = "git+https://github.com/acme/evalreg@0123456789abcdef0123456789abcdef01234567"
    assert cli(None, "init", str(target), "--evalreg-spec", spec).code == 0
    for workflow in sorted((target / ".github/workflows").glob("*.yml")):
        assert f'EVALREG_SPEC: "{spec}"' in workflow.read_text(), workflow.name
    assert cli(target, "report").code == 0
    assert f"python -m pip install '{spec}'\n" in (target / "reports/faq-routing.md").read_text()


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("evalreg", "is not pinned"),
        ("evalreg>=0.1", "not a pip requirement"),
        ('evalreg==1"\nrun: curl evil', "not a pip requirement"),
        ("evalreg==1 ; rm -rf ~", "not a pip requirement"),
        ("$(curl evil)", "not a pip requirement"),
        ("--index-url=https://evil.example/simple", "not a pip requirement"),
        ("git+https://github.com/acme/evalreg", "names no commit"),
    ],
)
def test_init_refuses_an_evalreg_spec_that_is_unpinned_or_unsafe(
    spec: str, why: str, tmp_path: Path, cli
):
    target = tmp_path / "r"
    result = cli(None, "init", str(target), f"--evalreg-spec={spec}")
    assert result.code == 2
    assert why in result.err
    assert not target.exists()


def test_registry_settings_are_loaded_strictly(repo: Repo, cli):
    repo.write("registry/evalreg.yaml", "schema_version: 1\ninstall: evalreg\nsnippets: off\n")
    result = cli(repo, "check")
    assert result.code == 2
    assert "registry/evalreg.yaml:2:10: install: 'evalreg' is not pinned" in result.err
    assert "registry/evalreg.yaml:3:1: unknown key 'snippets'" in result.err


def test_init_refuses_a_non_empty_directory(tmp_path: Path, cli):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    result = cli(None, "init", str(target))
    assert result.code == 2
    assert "exists and is not an empty directory" in result.err
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]


def test_check_json_summary(repo: Repo, cli):
    result = cli(repo, "check", "--json")
    assert result.code == 0
    data = json.loads(result.out)
    assert data["ok"] is True
    assert data["counts"]["eval items"] == 4
    assert data["use_cases"][0]["selection"] == "labels"
    assert data["use_cases"][0]["slices"] == {"common": 2, "edge": 2}


def test_warnings_pass_unless_strict(repo: Repo, cli):
    repo.write("registry/models/spare.yaml", repo.read("registry/models/rules.yaml"))
    repo.commit("unused pin")
    relaxed = cli(repo, "check")
    assert relaxed.code == 0
    assert (
        "registry/models/spare.yaml: warning: 'spare' is not used by any selection" in relaxed.err
    )
    assert cli(repo, "check", "--strict").code == 1


def test_check_finds_the_root_from_a_subdirectory(repo: Repo, cli, monkeypatch):
    monkeypatch.chdir(repo.root / "registry" / "tasks")
    assert cli(None, "check").code == 0


def test_user_error_from_the_real_command_has_no_traceback(repo: Repo):
    repo.write("registry/tasks/labels.yaml", "schema_version: 1\nrepeats: [\n")
    proc = subprocess.run(
        [sys.executable, "-m", "evalreg", "-C", str(repo.root), "check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("registry/tasks/labels.yaml:3:1: YAML syntax error")
    assert "Traceback" not in proc.stderr


def test_missing_directory_is_a_usage_error(tmp_path: Path, cli):
    result = cli(tmp_path / "nope", "check")
    assert result.code == 2
    assert "no such directory" in result.err


def test_help_lists_the_commands():
    proc = subprocess.run(
        [sys.executable, "-m", "evalreg", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert "check" in proc.stdout
    assert "init" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--limit", "-1"), "argument --limit: -1: expected a whole number from 1"),
        (("--limit", "x"), "argument --limit: x: expected a whole number from 1"),
        (("--max-concurrency", "0"), "argument --max-concurrency: 0: expected a whole number"),
        (("--max-cost", "nan"), "argument --max-cost: nan: expected an amount from 0"),
        (("--max-cost", "-1"), "argument --max-cost: -1: expected an amount from 0"),
    ],
)
def test_run_refuses_counts_and_budgets_that_mean_nothing(repo, cli, capsys, args, message):
    before = repo.snapshot()
    with pytest.raises(SystemExit) as exited:
        cli(repo, "run", "--dry-run", *args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert repo.snapshot() == before


def test_the_program_exits_with_the_collector_still_spared(repo: Repo):
    """Restoring the collector's thresholds with a command's objects alive would start a
    full collection just before the exit; the program keeps them raised and the objects
    frozen, out of the collector's sight, to the end."""
    from evalreg.cli import RARE_COLLECTIONS

    probe = (
        "import gc, runpy, sys\n"
        "sys.argv = ['evalreg', '-C', sys.argv[1], 'check']\n"
        "try:\n"
        "    runpy.run_module('evalreg', run_name='__main__')\n"
        "finally:\n"
        "    print('EXIT', gc.get_freeze_count() > 0, *gc.get_threshold())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(repo.root)], capture_output=True, text=True
    )
    last = done.stdout.splitlines()[-1].split()
    assert done.returncode == 0, done.stderr
    assert last == ["EXIT", "True", *map(str, RARE_COLLECTIONS)], done.stderr


def _exiting(body: str, *args: str, **popen: object) -> subprocess.Popen[str]:
    """A child that runs ``body`` as a command's handler, then exits as the program does."""
    probe = (
        "import atexit, sys, threading, time\n"
        "from evalreg import cli\n"
        f"{body}\n"
        "cli._command = lambda argv: handler()\n"
        "cli.entry()\n"
    )
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-c", probe, *args], text=True, **popen)  # type: ignore[call-overload]


def _ended(body: str) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``_exiting(body)``."""
    child = _exiting(body)
    out, err = child.communicate(timeout=60)
    return child.returncode, out, err


def test_the_program_exits_without_tearing_down_its_modules_yet_keeps_every_exit_duty():
    """The exit skips the finalisation that frees every module one object at a time, but
    keeps what an exit owes: the status, the ``atexit`` handlers a command's work
    registered (a temporary directory left to its finaliser is removed), buffered output."""
    body = (
        "import os, tempfile\n"
        "real_exit = os._exit\n"
        "def ending(code):\n"
        "    os.write(2, b'ended at once\\n')\n"
        "    real_exit(code)\n"
        "os._exit = ending\n"
        "kept = []\n"
        "def handler():\n"
        "    atexit.register(lambda: print('atexit ran'))\n"
        "    kept.append(tempfile.TemporaryDirectory(prefix='evalreg-exit-'))\n"
        "    print(kept[0].name)\n"
        "    sys.stdout.write('.' * 100_000)\n"
        "    print('last line')\n"
        "    return 3\n"
    )
    code, out, err = _ended(body)
    assert code == 3, err
    assert out.endswith("last line\natexit ran\n") and out.count(".") == 100_000
    assert err == "ended at once\n"
    assert not Path(out.splitlines()[0]).exists()


def test_a_site_hook_gets_the_ordinary_exit():
    """Exit work a ``sitecustomize`` registered before the program began would be called
    after the program's last handler: with one loaded, the exit tears down as Python's does."""
    body = (
        "import os, types\n"
        "sys.modules['sitecustomize'] = types.ModuleType('sitecustomize')\n"
        "os._exit = lambda code: os.write(2, b'ended at once\\n')\n"
        "atexit.register(lambda: print('registered before the program ran'))\n"
        "def handler():\n"
        "    return 4\n"
    )
    code, out, err = _ended(body)
    assert (code, out, err) == (4, "registered before the program ran\n", "")


def test_a_thread_still_running_at_the_exit_is_waited_for():
    body = (
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('thread finished')\n"
        "def handler():\n"
        "    threading.Thread(target=late).start()\n"
        "    return 0\n"
    )
    code, out, err = _ended(body)
    assert code == 0, err
    assert out == "thread finished\n"


def test_a_profiled_program_still_writes_its_profile(tmp_path: Path):
    """``python -m cProfile -o FILE -m evalreg ...`` writes FILE once the program returns."""
    out = tmp_path / "profile"
    example = Path(__file__).resolve().parent.parent
    profiled = [sys.executable, "-m", "cProfile", "-o", str(out)]
    done = subprocess.run(
        [*profiled, "-m", "evalreg", "-C", str(example), "check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


def test_output_that_cannot_be_written_at_the_exit_is_not_a_success():
    """stdout a pipe nobody reads any more (``evalreg status | head -0``): the exit status
    says the output was lost, as Python's own exit does (120)."""
    read, write = os.pipe()
    os.close(read)
    # Still buffered when the command returns: block-buffered, as a pipe is by default.
    body = "def handler():\n    sys.stdout.write('a table')\n    return 0\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    try:
        child = _exiting(body, stdout=write, env=env)
    finally:
        os.close(write)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 120, err


def test_a_command_starts_up_without_a_collection():
    """A command's start-up (modules, schemas, the registry) builds objects that live to
    the exit: a collection in its middle walks them all to free nothing. ``evalreg check``
    on the example registry is all start-up."""
    from evalreg.cli import RARE_COLLECTIONS

    probe = (
        "import gc, runpy, sys\n"
        "raised = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and raised.append("
        "gc.get_threshold() == RARE))\n"
        f"RARE = {RARE_COLLECTIONS!r}\n"
        "sys.argv = ['evalreg', '-C', sys.argv[1], 'check']\n"
        "try:\n"
        "    runpy.run_module('evalreg', run_name='__main__')\n"
        "finally:\n"
        "    print('EXIT', len(raised) > 0, sum(raised))\n"
    )
    example = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", probe, str(example)], capture_output=True, text=True
    )
    last = done.stdout.splitlines()[-1].split()
    assert done.returncode == 0, done.stderr
    # Collections before the program raised the thresholds (Python's own start) only.
    assert last == ["EXIT", "True", "0"], done.stderr


def test_a_command_called_as_a_library_restores_the_collector(repo: Repo, cli):
    import gc

    before = gc.get_threshold()
    assert cli(repo, "check").code == 0
    assert gc.get_threshold() == before

"""How fast `evalreg check` rejects hostile registry files (target: under 1 s each, start-up
included), and how fast `evalreg --help` starts (target: under 0.3 s).

Run: python tests/benchmarks/hostile_inputs.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_S = 1.0


def alias_bomb() -> str:
    lines = ["schema_version: 1", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 30)]
    return "\n".join(lines) + "\n"


def big_flow() -> str:
    body = ", ".join(str(i) for i in range(180_000))
    return f"schema_version: 1\ndescription: [{body}]\n"[: (256 << 10) - 1]


CASES: dict[str, tuple[str, str | bytes]] = {
    "alias bomb (9^30 if expanded)": ("registry/rubrics/r.yaml", alias_bomb()),
    "256 KiB flow sequence (the size limit)": ("registry/rubrics/r.yaml", big_flow()),
    "10 MiB file (over the size limit)": ("registry/rubrics/r.yaml", "a: " + "x" * (10 << 20)),
    "nesting 100,000 deep": ("registry/rubrics/r.yaml", "a: " + "[" * 100_000),
    "python object tags x 10,000": (
        "registry/rubrics/r.yaml",
        "".join(f"k{i}: !!python/object/apply:os.system ['true']\n" for i in range(10_000)),
    ),
    "binary garbage": ("registry/rubrics/r.yaml", bytes(range(256)) * 4096),
}


def nested_item(depth: int) -> str:
    return '{"id": "d", "input": {"x": ' + "[" * depth + "]" * depth + "}}"


def registry_files(template: str) -> dict[str, str]:
    """A registry that loads, whose one task renders ``template`` over e.jsonl."""
    return {
        "registry/models/p.yaml": "schema_version: 1\nprovider: python\ncallable: s.py:f\n",
        "s.py": "def f(request):\n    return 'a'\n",
        "registry/rubrics/r.yaml": (
            "schema_version: 1\ndescription: d\nversion: '1'\ncriteria:\n"
            "  - {id: c, description: d, critical: true, grader: {type: exact, value: a}}\n"
        ),
        "registry/tasks/t.yaml": (
            "schema_version: 1\ndescription: d\nevalset: e.jsonl\n"
            f"prompt: {{template: {json.dumps(template)}}}\nrubric: r\n"
        ),
        "registry/selections/s.yaml": (
            "schema_version: 1\nuse_case: u\ntask: t\ncandidates: [{id: p, pin: p}]\n"
            "policy: {objective: {lexicographic: [{maximize: pass_rate}]}}\nselected: p\n"
            "rationale: r\n"
        ),
    }


def time_check(root: Path) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "evalreg", "-C", str(root), "check"],
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalreg", "--help"], capture_output=True, check=True)
    help_s = time.perf_counter() - started
    print(f"{'evalreg --help':45s} {help_s:6.3f} s   {help_s / 0.3:5.2f} x the 0.3 s target")
    for name, (rel, content) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / ".git").mkdir()
            path = root / rel
            path.parent.mkdir(parents=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            seconds, code = time_check(root)
        print(f"{name:45s} {seconds:6.3f} s   {seconds / TARGET_S:5.2f} x target   exit {code}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".git").mkdir()
        (root / "registry" / "tasks").mkdir(parents=True)
        (root / "registry" / "tasks" / "t.yaml").write_text(
            "schema_version: 1\ndescription: d\nevalset: e.jsonl\nprompt: {template: '{{ x }}'}\n"
            "rubric: r\n"
        )
        rows = [json.dumps({"id": f"i{i % 50_000}", "input": {"y": 1}}) for i in range(100_000)]
        (root / "e.jsonl").write_text("\n".join(rows) + "\n")
        seconds, code = time_check(root)
        print(
            f"{'JSONL, 100,000 lines, 50,000 duplicate ids':45s} {seconds:6.3f} s   "
            f"{seconds / TARGET_S:5.2f} x target   exit {code}"
        )
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    for name, template, line in (
        ("JSONL item nested 100,000 deep", "{{ x }}", nested_item(100_000)),
        ("template looping 10^10 times", loops, '{"id": "i", "input": {"x": 1}}'),
        ("template building 10^9 characters", "{{ 'a' * 10**9 }}", '{"id": "i", "input": {}}'),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / ".git").mkdir()
            for rel, text in registry_files(template).items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
            (root / "e.jsonl").write_text(line + "\n")
            seconds, code = time_check(root)
        print(f"{name:45s} {seconds:6.3f} s   {seconds / TARGET_S:5.2f} x target   exit {code}")
    seconds, code = time_check(ROOT)
    print(
        f"{'the example registry':45s} {seconds:6.3f} s   {seconds / TARGET_S:5.2f} x target   "
        f"exit {code}"
    )


if __name__ == "__main__":
    main()

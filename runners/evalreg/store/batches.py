"""Batches submitted to a provider's batch API and not collected yet, journalled durably.

``batches.json`` in the repository's state directory (beside the run journal) lists them;
the exact requests of each are in ``batches/<local id>.jsonl`` there (one line a request:
its store key, its sample and the exact body sent), so a batch is collected into the store
whoever collects it: this run after waiting, a later run, or a later CI job on the same
checkout, whatever the registry says by then.

A batch is journalled in steps, each written durably before the call that follows it:

1. ``intent``: its requests, before anything is sent.
2. ``uploaded`` (OpenAI): the id of the uploaded input file, before the batch is created.
   A batch is created from exactly one file, so a run stopped before it learnt the new
   batch's id finds that batch again among the account's batches by its input file.
3. ``submitted``: the provider's batch id, before waiting for it.

A batch is created in one call that is not idempotent, so a run stopped after sending it
and before journalling the answer (or a creation that timed out or failed with a 5xx)
cannot know whether the batch exists: the batch is looked for before another is created
(``providers.batch``), by its input file (OpenAI), its display name, which carries the
local id (Gemini API), or, for Anthropic's Message Batches, which carry neither a name nor
an idempotency key, as the only batch created since the intent with exactly its number of
requests. Only a batch that cannot be told apart, or that the listing does not show yet,
is submitted again, and the run says so.

A key in a journalled batch is never submitted again until that batch is collected; a
collected batch leaves the journal only once its responses are stored and synced.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalreg.store.journal import write_durably
from evalreg.store.lock import state_dir
from evalreg.store.segments import load_json, utc_now

BATCHES = "batches.json"
REQUESTS_DIR = "batches"

INTENT = "intent"
UPLOADED = "uploaded"
SUBMITTED = "submitted"


@dataclass(frozen=True)
class BatchRequest:
    """One request of a batch: the key it is stored under and the exact body sent."""

    key: str
    sample: int
    content: bytes


@dataclass
class Batch:
    """One batch, from intent to collection."""

    local_id: str
    api: str
    """The batch protocol: ``openai`` (Files and Batches), ``anthropic`` (Message Batches)
    or ``gemini`` (the Gemini API's batch mode)."""
    provider: str
    """The provider of the requests (their store keys name it)."""
    pin_id: str
    endpoint: str
    """The endpoint the requests are keyed by (the live one)."""
    created_utc: str
    state: str = INTENT
    file_id: str | None = None
    batch_id: str | None = None
    expires_utc: str | None = None
    keys: list[str] = field(default_factory=list)


class BatchJournal:
    """The journalled batches of one repository (the caller holds the repository lock)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.batches: list[Batch] = []

    @property
    def path(self) -> Path:
        return state_dir(self.root) / BATCHES

    def requests_path(self, batch: Batch) -> Path:
        return state_dir(self.root) / REQUESTS_DIR / f"{batch.local_id}.jsonl"

    @classmethod
    def load(cls, root: Path) -> BatchJournal:
        journal = cls(root)
        try:
            data = json.loads(journal.path.read_bytes())
            entries = data["batches"] if data.get("version") == 1 else []
            journal.batches = [Batch(**entry) for entry in entries]
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError):
            # Written atomically, so never torn: a file in another shape is not ours.
            journal.batches = []
        return journal

    def save(self) -> None:
        state = {"version": 1, "batches": [asdict(b) for b in self.batches]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_durably(self.path, json.dumps(state, indent=1, sort_keys=True).encode())

    def pending_keys(self) -> set[str]:
        """Keys in a journalled batch: they are not to be submitted or bought again."""
        return {key for batch in self.batches for key in batch.keys}

    def begin(
        self, api: str, provider: str, pin_id: str, endpoint: str, requests: list[BatchRequest]
    ) -> Batch:
        """Journal the intent to submit ``requests`` as one batch (its requests first)."""
        batch = Batch(
            secrets.token_hex(6),
            api,
            provider,
            pin_id,
            endpoint,
            utc_now(),
            keys=[r.key for r in requests],
        )
        path = self.requests_path(batch)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = (
            b'{"key":"%s","sample":%d,"request":%b}\n' % (r.key.encode(), r.sample, r.content)
            for r in requests
        )
        write_durably(path, b"".join(lines))
        self.batches.append(batch)
        self.save()
        return batch

    def update(self, batch: Batch, **changes: Any) -> None:
        """Record a step of ``batch`` (``state``, ``file_id``, ``batch_id``...) durably."""
        for name, value in changes.items():
            setattr(batch, name, value)
        self.save()

    def requests(self, batch: Batch) -> Iterator[BatchRequest]:
        """The requests of ``batch``, as journalled."""
        for line in self.requests_path(batch).read_bytes().splitlines():
            if not line:
                continue
            head = load_json(line)
            # The body's bytes, exactly as sent: what follows ``"request":`` up to the end.
            start = line.index(b'"request":') + len(b'"request":')
            yield BatchRequest(str(head["key"]), int(head["sample"]), line[start:-1])

    def remove(self, batches: Iterable[Batch]) -> None:
        """Forget collected batches (their responses are stored and synced)."""
        gone = {b.local_id for b in batches}
        if not gone:
            return
        self.batches = [b for b in self.batches if b.local_id not in gone]
        self.save()
        for local_id in gone:
            (state_dir(self.root) / REQUESTS_DIR / f"{local_id}.jsonl").unlink(missing_ok=True)

"""What the providers' model lists say about each pin of a registry: ``evalreg propose``'s
first step. Each list is asked once for the pins that share it (same provider, URL and
credentials), with the first such pin's; a provider that does not answer is reported for
its pins, and the others are still surveyed.

A newer snapshot is proposed once for the pins that ask their model alike (the same list,
and the same settings but the model, its prices and notes), and only while none of them
names it: a snapshot a pin like this one already names (a merged proposal, a pin added by
hand) is not proposed again, and of several like pins that would each propose the same
one (an old snapshot and a later one, both pinned), the pin of the latest snapshot
proposes it. A pin that asks differently (another temperature) gets its own proposal."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from evalreg.errors import EvalregError
from evalreg.propose.listing import LIST_LIMITS, Source, model_ids, source
from evalreg.propose.snapshots import Finding, Version, examine, read
from evalreg.providers.base import ProviderError
from evalreg.redaction import url_without_credentials
from evalreg.registry.loader import Registry

if TYPE_CHECKING:
    from evalreg.providers.http import HttpLayer


AZURE_NOTE = (
    "Azure OpenAI: no branch is made. Deploy a newer model in the resource before a pin can "
    "use it; a model no longer offered for new deployments may still run in an existing one "
    "until its retirement date"
)


@dataclass(frozen=True)
class PinReport:
    """One pin: what its provider's list says about it, or why it was not asked."""

    pin: str
    model: str | None
    finding: Finding | None = None
    skipped: str | None = None
    """Why this pin's provider has no list here (a Python callable, a deployment...)."""
    error: str | None = None
    """Why its provider's list could not be read (the pin is then unknown, not retired)."""
    deploy_first: str | None = None
    """For an Azure OpenAI pin: why what was found is reported, not made a branch."""
    listed_by: str | None = None
    """The list asked for this pin, as it may be written down (no credentials in it)."""
    not_proposed: str | None = None
    """Why ``finding.newer`` is not proposed for this pin (already pinned, or proposed for
    another pin)."""


def survey(registry: Registry, root: Path) -> list[PinReport]:
    """Every pin of ``registry`` (the repository at ``root``), in id order, with what its
    provider's model list says."""
    from evalreg.providers.http import HttpLayer

    network = registry.settings.network

    async def go() -> list[PinReport]:
        async with HttpLayer(ca_bundle=network.ca_bundle, root=root) as http:
            return await _survey(registry, http)

    return asyncio.run(go())


async def _survey(registry: Registry, http: HttpLayer) -> list[PinReport]:
    groups: dict[tuple[str, str, str], tuple[Source, list[str]]] = {}
    reports: dict[str, PinReport] = {}
    for pin_id, pin in sorted(registry.pins.items()):
        where = source(pin)
        if isinstance(where, str):
            reports[pin_id] = PinReport(pin_id, pin.model, skipped=where)
        elif not pin.model:
            reports[pin_id] = PinReport(pin_id, None, skipped="the pin names no model")
        else:
            groups.setdefault(where.key, (where, []))[1].append(pin_id)

    async def one(src: Source, pins: list[str]) -> None:
        first = pins[0]

        async def get(url: str, headers: dict[str, str]) -> bytes:
            return await http.call(first, LIST_LIMITS, "GET", url, headers)

        listed_by = url_without_credentials(src.url)
        try:
            ids = await model_ids(src, get)
            if not ids:
                # A server that lists nothing says nothing about any model: retiring every
                # pin on its word would be wrong.
                raise ProviderError("malformed", "it listed no model at all: nothing concluded")
        except (ProviderError, EvalregError) as exc:
            for pin_id in pins:
                model = registry.pins[pin_id].model
                reports[pin_id] = PinReport(
                    pin_id, model, error=f"{listed_by}: {exc}", listed_by=listed_by
                )
            return
        for pin_id in pins:
            model = registry.pins[pin_id].model
            assert model is not None
            note = AZURE_NOTE if src.kind == "azure" else None
            reports[pin_id] = PinReport(
                pin_id, model, finding=examine(model, ids), deploy_first=note, listed_by=listed_by
            )

    await asyncio.gather(*(one(src, pins) for src, pins in groups.values()))
    return _once_each(registry, groups, reports)


_NOT_SETTINGS = {"model", "price", "retired", "description", "benchmarks"}
"""What a proposed pin changes or may differ in from the pin it follows."""


def _settings(registry: Registry, pin_id: str) -> str:
    """What ``pin_id``'s pin asks its model with: all of it but :data:`_NOT_SETTINGS`."""
    pin = registry.pins[pin_id]
    return json.dumps(pin.model_dump(mode="json", exclude=_NOT_SETTINGS), sort_keys=True)


def _once_each(
    registry: Registry,
    groups: dict[tuple[str, str, str], tuple[Source, list[str]]],
    reports: dict[str, PinReport],
) -> list[PinReport]:
    """``reports``, in pin order, each newer snapshot left to one pin to propose."""
    # A pin "like" another asks the same list with the same settings but its model: a pin
    # of the newer snapshot like this one is this one's successor, already pinned.
    pinned: dict[tuple[str, str, str, str], str] = {}  # (kind, url, settings, model) -> pin
    for src, pins in groups.values():
        for pin_id in sorted(pins):
            model = registry.pins[pin_id].model
            assert model is not None
            pinned.setdefault((src.kind, src.url, _settings(registry, pin_id), model), pin_id)
    proposers: dict[tuple[str, str, str, str], list[str]] = {}
    for src, pins in groups.values():
        for pin_id in pins:
            finding = reports[pin_id].finding
            if finding is None or finding.newer is None:
                continue
            like = (src.kind, src.url, _settings(registry, pin_id), finding.newer)
            already = pinned.get(like)
            if already is not None:
                reports[pin_id] = replace(
                    reports[pin_id], not_proposed=f"{finding.newer} is already pinned as {already}"
                )
            else:
                proposers.setdefault(like, []).append(pin_id)

    def version(pin_id: str) -> Version | None:
        return read(registry.pins[pin_id].model or "").version

    for (*_, newer), pins in proposers.items():
        # The pin of the latest snapshot proposes it (the first in id order, of several).
        latest = max((v for v in map(version, pins) if v is not None), default=None)
        chosen = min(p for p in pins if version(p) == latest)
        for pin_id in pins:
            if pin_id == chosen:
                continue
            reports[pin_id] = replace(
                reports[pin_id], not_proposed=f"{newer} is proposed for the pin {chosen}"
            )
    return [reports[pin_id] for pin_id in sorted(reports)]

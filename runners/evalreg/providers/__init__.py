"""Providers turn a rendered conversation into a request body and a response into text.

Each provider registers under the ``provider:`` name used in model pins.
"""

from __future__ import annotations

from evalreg.providers.base import (
    Completion,
    Provider,
    ProviderError,
    all_providers,
    get_provider,
    register,
)

__all__ = [
    "Completion",
    "Provider",
    "ProviderError",
    "all_providers",
    "get_provider",
    "register",
]

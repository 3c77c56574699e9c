"""evalreg: a GitOps eval registry for choosing AI models on your own evidence.

The public Python API is small: load a registry (``load_registry``) and read its
findings. Everything else is internal and may change between releases.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

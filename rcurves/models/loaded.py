"""What every pipeline of the toolkit takes: a model with its label, identity and provenance."""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple


class LoadedModel(NamedTuple):
    """A model ready for the pipeline.

    ``identity`` is what a resumed run must match (a hash of the checkpoint's
    metadata, or the import path); ``info`` is JSON-ready provenance;
    ``model`` and ``params`` are the architecture and weights of a toolkit
    model (checkpoint or zoo; None for a bare ``logits_fn``), which
    ``rcurves.certify.from_model`` needs.
    """

    label: str
    logits_fn: Callable
    identity: str
    info: Dict[str, Any]
    model: Any = None
    params: Any = None


__all__ = ["LoadedModel"]

"""The RightMemory ``/info`` document of a model host.

Apart from ``service_state`` so that the thin retrieve client, which reads service state but
never a model's description, does not import ``dataclasses`` (and ``inspect`` behind it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    """The RightMemory ``/info`` document."""

    embedding_model: str
    reranker_model: str
    dimensions: int
    max_batch_size: int
    max_candidates: int
    reranker_is_cross_encoder: bool = False

    def to_json(self) -> dict:
        return {"version": 1, "embedding_model": self.embedding_model, "reranker_model": self.reranker_model,
                "dimensions": self.dimensions, "max_batch_size": self.max_batch_size,
                "max_candidates": self.max_candidates, "cross_encoder": self.reranker_is_cross_encoder}

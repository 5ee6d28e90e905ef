"""The model host: the embedding and reranking models (ONNX Runtime or torch), the local
warm service that keeps them loaded, its client and where its state lives.

Ranking (``corpus``, ``ranking``, ``stage2``, ``render``, ``vectors``, ``tokens``) never
imports this package (an import-linter contract): it works on vectors and scores, whoever
made them. ``retrieve`` orchestrates both.
"""

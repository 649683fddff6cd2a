"""The neighbours map: a PCA to 2-D of the neighbour decoder states, with the sentence's own
trajectory placed on it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .index import NeighbourIndex, unit_rows


@dataclass
class Projection:
    """A 2-D map of the neighbours' decoder states (PCA of their unit-length vectors, centred on
    their mean) with this sentence's trajectory placed on it.

    points      (P, 2)  each distinct neighbour state, in order of first appearance
    rows        P       its state row in the index; steps: the first query step it is a neighbour of
    pieces      P       its training target piece
    trajectory  (T, 2)  this sentence's decoder state at each step, on the same axes
    explained   (2,)    the share of the neighbours' variance along each axis"""
    points: np.ndarray
    rows: list[int]
    steps: list[int]
    pieces: list[str]
    trajectory: np.ndarray
    explained: np.ndarray

    def to_json(self) -> dict:
        return {"points": np.round(self.points, 5).tolist(), "rows": self.rows, "steps": self.steps,
                "pieces": self.pieces, "trajectory": np.round(self.trajectory, 5).tolist(),
                "explained": np.round(self.explained, 5).tolist()}


def project(index: NeighbourIndex, rows: torch.Tensor, trajectory: torch.Tensor, tok) -> Projection:
    """PCA to 2-D of the distinct neighbour states `rows` (T, k) (unit-length, as searched),
    fitted on them alone (the map is the training data's; the sentence is placed on it), by an
    exact SVD in float64 (deterministic, unlike a randomised low-rank PCA; torch's, which keeps to
    torch's threads, where numpy's OpenBLAS starts its own and stalls on a busy machine). Each
    axis's sign is set so that its largest loading is positive: the same neighbours always draw
    the same map."""
    flat = rows.reshape(-1).tolist()
    first: dict[int, int] = {}
    for n, r in enumerate(flat):
        first.setdefault(r, n // rows.size(1))
    uniq = list(first)
    x = index.state_keys[uniq].double()                              # (P, D)
    q = unit_rows(trajectory).double()                               # (T, D)
    mean = x.mean(0)
    _, s, vt = torch.linalg.svd(x - mean, full_matrices=False)
    axes = torch.zeros(2, x.size(1), dtype=torch.float64)
    n_axes = min(2, vt.size(0))
    axes[:n_axes] = vt[:n_axes]
    for a in range(n_axes):
        if axes[a, axes[a].abs().argmax()] < 0:
            axes[a] = -axes[a]
    var = s ** 2
    explained = torch.zeros(2, dtype=torch.float64)
    if float(var.sum()) > 0:
        explained[:n_axes] = var[:n_axes] / var.sum()
    pieces = index.pieces[uniq].tolist()
    return Projection(((x - mean) @ axes.T).numpy(), uniq, [first[r] for r in uniq], [tok.piece(p) for p in pieces],
                      ((q - mean) @ axes.T).numpy(), explained.numpy())

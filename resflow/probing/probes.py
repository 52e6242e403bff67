r"""Hidden-state probes: the metrics of :mod:`resflow.probing.metrics`, aggregated over many tokens.

Aggregation streams over batches: exact means, and quantiles from a fixed-size reservoir sample of
tokens (Vitter's Algorithm R), so memory does not grow with the number of tokens.  The reservoir's
per-token update-size profiles (:math:`\|\Delta h_l\|` as shares of the token's total path) are
clustered (PCA, then 2-means) to measure the fraction of tokens that stop early: the cluster whose
updates are concentrated in the first half of the layers counts as "stopping early" if it puts
less than ``EARLY_LATE_SHARE`` of its path in the second half (an even profile puts about half
there).  The same code probes resflow teachers and students and transformer models
(:mod:`resflow.llm.probes.hf_probe`).  Reference: Liu, Kangaslahti, Liu & Gore, arXiv:2602.05970 (2026),
Sec. on LLM hidden states.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import ConfigError, ShapeError
from ..loglog import slopes
from .metrics import METRIC_LABELS, METRICS, token_metrics

__all__ = ["middle_layers", "QUANTILES", "ProbeAccumulator", "ProbeResult", "probe_states",
           "early_stop_fraction", "angle_early_stop_fraction", "step_size_slope",
           "probe_dataset", "state_signature", "SIGNATURE_LABELS"]

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
RESERVOIR = 4096
EARLY_LATE_SHARE = 0.25


def middle_layers(n: int) -> slice:
    """The middle layers of ``n``: from a quarter to three quarters (at least one), where the regimes differ
    most."""
    return slice(n // 4, max(3 * n // 4, n // 4 + 1))


@dataclass
class ProbeResult:
    """Aggregated probe of one model: per-layer means and quantiles of every metric (NaN-padded to L + 1)."""

    model: str
    n_layers: int
    n_tokens: int
    mean: dict[str, np.ndarray]
    quantiles: dict[str, np.ndarray]  # name -> (len(QUANTILES), L + 1)
    early_stop_fraction: float
    last_state_after_final_norm: bool | None = None
    prenorm_mean: dict[str, np.ndarray] = field(default_factory=dict)
    losses: dict[str, np.ndarray] = field(default_factory=dict)  # logit_lens, last_layer_lens (L + 1,)
    kind: str = "stack"
    angle_early_stop_fraction: float = float("nan")  # the study's clustering (PCA of per-layer step angles)

    @property
    def middle(self) -> slice:
        return middle_layers(self.n_layers)

    def summary(self) -> dict[str, float]:
        """Regime-discriminating statistics over the middle layers."""
        up = self.quantiles["update_angle"][QUANTILES.index(0.5)][self.middle]
        rel_step = self.mean["update_norm"][self.middle] / self.mean["norm"][self.middle]
        return {"median_update_angle_middle": float(np.nanmedian(up)),
                "relative_step_middle": float(np.nanmean(rel_step))}

    def to_json(self) -> dict:
        def clean(a):
            return [None if not np.isfinite(v) else float(v) for v in a]

        out = {"model": self.model, "kind": self.kind, "n_layers": self.n_layers, "n_tokens": self.n_tokens}
        for name in ("step_angle", "update_angle", "norm", "angle_to_final", "progress", "update_norm"):
            out[name] = clean(self.mean[name])
        out["early_stop_fraction"] = self.early_stop_fraction
        out["angle_early_stop_fraction"] = self.angle_early_stop_fraction
        out["last_state_after_final_norm"] = self.last_state_after_final_norm
        if self.prenorm_mean:
            out["prenorm"] = {k: clean(v) for k, v in self.prenorm_mean.items()}
        for name, values in self.losses.items():
            out[name] = clean(values)
        out.update(self.summary())
        return out


class ProbeAccumulator:
    """Streaming aggregation of :func:`token_metrics` over batches of tokens."""

    def __init__(self, n_layers: int, *, reservoir: int = RESERVOIR, seed: int = 0) -> None:
        self.n_layers = n_layers
        self.sums = {name: np.zeros(n_layers + 1) for name in METRICS}
        self.counts = {name: np.zeros(n_layers + 1) for name in METRICS}
        self.prenorm_sums = {name: np.zeros(n_layers + 1) for name in METRICS}
        self.loss_sums: dict[str, np.ndarray] = {}
        self.loss_counts: dict[str, np.ndarray] = {}
        self.capacity = reservoir
        self.sample: dict[str, np.ndarray] = {}
        self.seen = 0
        self.rng = np.random.default_rng(seed)

    def add(self, states: torch.Tensor, *, prenorm_last: torch.Tensor | None = None) -> None:
        """Add tokens: ``states`` ``(L + 1, n, d)``; optionally the pre-final-norm last state ``(n, d)``."""
        if states.shape[0] != self.n_layers + 1:
            raise ShapeError(f"expected {self.n_layers + 1} states per token, got {states.shape[0]}.")
        metrics = {k: v.cpu().numpy() for k, v in token_metrics(states).items()}
        n = states.shape[1]
        for name, values in metrics.items():
            self.sums[name][: values.shape[0]] += values.sum(axis=1)
            self.counts[name][: values.shape[0]] += n
        if prenorm_last is not None:
            alt = states.clone()
            alt[-1] = prenorm_last
            for name, values in token_metrics(alt).items():
                self.prenorm_sums[name][: values.shape[0]] += values.cpu().numpy().sum(axis=1)
        self._reservoir(metrics, n)

    def add_loss(self, name: str, per_layer_sum: np.ndarray, count: int) -> None:
        if name not in self.loss_sums:
            self.loss_sums[name] = np.zeros(self.n_layers + 1)
            self.loss_counts[name] = np.zeros(self.n_layers + 1)
        self.loss_sums[name][: len(per_layer_sum)] += per_layer_sum
        self.loss_counts[name][: len(per_layer_sum)] += count

    def _reservoir(self, metrics: dict[str, np.ndarray], n: int) -> None:
        rows = {k: np.full((n, self.n_layers + 1), np.nan) for k in metrics}
        for k, v in metrics.items():
            rows[k][:, : v.shape[0]] = v.T
        # Algorithm R, vectorised: token t (global index) goes to slot t while the reservoir fills,
        # then to a uniform slot in [0, t] if that slot is inside the reservoir
        t = self.seen + np.arange(n)
        slots = np.where(t < self.capacity, t, self.rng.integers(0, t + 1))
        keep = slots < self.capacity
        for k in rows:
            if k not in self.sample:
                self.sample[k] = np.full((self.capacity, self.n_layers + 1), np.nan)
            self.sample[k][slots[keep]] = rows[k][keep]
        self.seen += n

    def result(self, model: str, *, kind: str = "stack", last_state_after_final_norm: bool | None = None
               ) -> ProbeResult:
        if self.seen == 0:
            raise ConfigError(f"no tokens were probed for {model!r}; give non-empty inputs.")
        kept = min(self.seen, self.capacity)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = {k: self.sums[k] / np.where(self.counts[k] > 0, self.counts[k], np.nan) for k in METRICS}
            quantiles = {k: np.quantile(self.sample[k][:kept], QUANTILES, axis=0) if kept else None
                         for k in METRICS}
            prenorm = ({k: self.prenorm_sums[k] / np.where(self.counts[k] > 0, self.counts[k], np.nan)
                        for k in METRICS} if any(v.any() for v in self.prenorm_sums.values()) else {})
            losses = {k: self.loss_sums[k] / np.where(self.loss_counts[k] > 0, self.loss_counts[k], np.nan)
                      for k in self.loss_sums}
        fraction = early_stop_fraction(self.sample["update_norm"][:kept, : self.n_layers])
        by_angle = angle_early_stop_fraction(self.sample["step_angle"][:kept, : self.n_layers])
        return ProbeResult(model, self.n_layers, self.seen, mean, quantiles, fraction,
                           last_state_after_final_norm, prenorm, losses, kind, by_angle)


def _early_cluster(x: np.ndarray, shares: np.ndarray, iterations: int) -> float:
    """Fraction of the rows of ``x`` in the cluster that stops early: the top two principal components of
    ``x``, 2-means (deterministic start at the extreme projections); the early cluster is the one whose mean
    row of ``shares`` puts less than ``EARLY_LATE_SHARE`` in the second half of the layers (0 if none)."""
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    z = centred @ vt[: min(2, vt.shape[0])].T
    centres = z[[np.argmin(z[:, 0]), np.argmax(z[:, 0])]]
    labels = np.zeros(len(z), dtype=int)
    for _ in range(iterations):
        labels = np.argmin(((z[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
        new = np.array([z[labels == c].mean(axis=0) if np.any(labels == c) else centres[c] for c in (0, 1)])
        if np.allclose(new, centres):
            break
        centres = new
    half = shares.shape[1] // 2
    late = [shares[labels == c, half:].sum(axis=1).mean() if np.any(labels == c) else np.inf for c in (0, 1)]
    early = int(np.argmin(late))
    return float(np.mean(labels == early)) if late[early] < EARLY_LATE_SHARE else 0.0


def _profiles(profiles: np.ndarray) -> np.ndarray:
    x = np.asarray(profiles, float)[:, :-1] if profiles.shape[1] > 2 else np.asarray(profiles, float)
    return x[np.all(np.isfinite(x), axis=1)]


def early_stop_fraction(profiles: np.ndarray, *, iterations: int = 50) -> float:
    """Fraction of tokens in an early-stopping cluster of update-size profiles ``(n_tokens, L)``.

    Profiles are normalised to shares of each token's path (the last layer, which the study finds
    special, is left out), projected on their top two principal components and split by 2-means (deterministic
    initialisation at the extreme projections).  The cluster whose mean profile puts less than
    ``EARLY_LATE_SHARE`` of its path in the second half of the layers stops early; if neither
    does, the fraction is 0.
    """
    x = _profiles(profiles)
    if len(x) < 4 or x.shape[1] < 2:
        return 0.0
    shares = x / np.clip(x.sum(axis=1, keepdims=True), 1e-12, None)
    return _early_cluster(shares, shares, iterations)


def angle_early_stop_fraction(step_angles: np.ndarray, *, iterations: int = 50) -> float:
    """The study's clustering: each token's vector of per-layer angles :math:`\theta(h_l, h_{l+1})`
    ``(n_tokens, L)`` (the last layer left out), PCA of the raw vectors, 2-means on the top two components;
    the cluster whose angles fall off (less than ``EARLY_LATE_SHARE`` of its angle sum in the second half)
    is the "early-stop" cluster, the other the "uniform middle-layer update" one (the study: 0.4% and
    99.6% of Pythia-410m's tokens).  :func:`early_stop_fraction` clusters update-size shares instead."""
    x = _profiles(step_angles)
    if len(x) < 4 or x.shape[1] < 2:
        return 0.0
    return _early_cluster(x, x / np.clip(x.sum(axis=1, keepdims=True), 1e-12, None), iterations)


SIGNATURE_LABELS = {**METRIC_LABELS, "early_stop_fraction": (
    "fraction of inputs whose updates stop early (the probes' 2-means clustering of update-size profiles)",
    "1")}


def state_signature(states: torch.Tensor) -> dict[str, torch.Tensor]:
    """The probe signature of one model on inputs ``(L + 1, n, d)``: every :func:`token_metrics` per input
    ``(layers, n)`` and its :func:`early_stop_fraction` (0-d), the numbers a ``probe`` record holds for a
    transformer.  What :func:`resflow.workflows.run_experiment` records for every trained student."""
    metrics = token_metrics(states)
    profiles = metrics["update_norm"].T.cpu().numpy()
    # a diverged model has no fraction (early_stop_fraction would cluster only its finite profiles)
    fraction = early_stop_fraction(profiles) if np.isfinite(profiles).all() else float("nan")
    return {**metrics, "early_stop_fraction": torch.tensor(fraction, dtype=torch.float64)}


def probe_states(states_batches, model: str, *, kind: str = "stack", seed: int = 0) -> ProbeResult:
    """Probe an iterable of state tensors ``(L + 1, n, d)`` (e.g. batches of a teacher or student)."""
    acc = None
    for states in states_batches:
        if acc is None:
            acc = ProbeAccumulator(states.shape[0] - 1, seed=seed)
        acc.add(states)
    if acc is None:
        raise ConfigError(f"no states to probe for {model!r}.")
    return acc.result(model, kind=kind)


def step_size_slope(results: list[ProbeResult]) -> float:
    """Slope of log(middle-layer relative step size) against log(depth) across models of different depth
    (about -1 when steps shrink like 1/L)."""
    depths = np.array([r.n_layers for r in results], float)
    steps = np.array([r.summary()["relative_step_middle"] for r in results], float)
    if len(set(depths)) < 2:
        raise ConfigError("step_size_slope needs models of at least two different depths.")
    return -slopes(depths, steps)




def probe_dataset(results: list[ProbeResult]):
    """A ``probe`` store record: per-layer means and quantiles of every metric, per model."""
    import xarray as xr

    if not results:
        raise ConfigError("no probe results to store.")
    width = max(r.n_layers for r in results) + 1
    models = [r.model for r in results]

    def pad(a):
        out = np.full(width, np.nan)
        out[: len(a)] = a
        return out

    data = {}
    for name, (long_name, units) in METRIC_LABELS.items():
        data[f"{name}_mean"] = (("model", "layer"), np.stack([pad(r.mean[name]) for r in results]),
                                {"long_name": f"mean {long_name} over tokens", "units": units})
        data[f"{name}_quantile"] = (("model", "quantile", "layer"),
                                    np.stack([np.stack([pad(q) for q in r.quantiles[name]])
                                              for r in results]),
                                    {"long_name": f"quantiles of {long_name} over tokens", "units": units})
        data[f"{name}_prenorm_mean"] = (
            ("model", "layer"),
            np.stack([pad(r.prenorm_mean[name]) if r.prenorm_mean else np.full(width, np.nan)
                      for r in results]),
            {"long_name": f"mean {long_name}, with the pre-final-norm state as h_L", "units": units})
    for lens in ("logit_lens", "last_layer_lens"):
        data[lens] = (("model", "layer"), np.stack([pad(r.losses.get(lens, [])) for r in results]),
                      {"long_name": f"next-token loss through the {lens.replace('_', ' ')}",
                       "units": "nat"})
    data["n_layers"] = (("model",), [r.n_layers for r in results],
                        {"long_name": "layers L", "units": "layers"})
    data["n_tokens"] = (("model",), [r.n_tokens for r in results],
                        {"long_name": "tokens probed", "units": "1"})
    data["early_stop_fraction"] = (("model",), [r.early_stop_fraction for r in results],
                                   {"long_name": "fraction of tokens in an early-stopping cluster",
                                    "units": "1"})
    data["angle_early_stop_fraction"] = (("model",), [r.angle_early_stop_fraction for r in results], {
        "long_name": "fraction of tokens in the early-stop cluster of the study's PCA of per-layer "
                     "step angles",
        "units": "1"})
    data["last_state_after_final_norm"] = (
        ("model",), [{None: "unknown", True: "yes", False: "no"}[r.last_state_after_final_norm]
                     for r in results],
        {"long_name": "whether the returned last hidden state is taken after the final norm", "units": "1"})
    return xr.Dataset(data, coords={
        "model": ("model", models, {"long_name": "probed model"}),
        "layer": ("layer", np.arange(width), {"long_name": "layer index l"}),
        "quantile": ("quantile", list(QUANTILES), {"long_name": "quantile over tokens", "units": "1"}),
    })

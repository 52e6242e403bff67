"""What every demo returns, and the registry of demos by name."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._atomic import atomic_write
from .._validate import check_choice
from ..errors import ConfigError
from ..provenance import provenance

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

__all__ = ["DemoResult", "DEMOS", "register", "run_demo", "finish"]

DEMOS: dict[str, Callable[..., DemoResult]] = {}  # name -> demo function, in teaching order


@dataclass(frozen=True, kw_only=True)
class DemoResult:
    """A demo's figure (inline in Jupyter), its data (with provenance attrs) and how long it took."""

    name: str
    title: str
    figure: Figure
    data: xr.Dataset
    seconds: float

    def _repr_png_(self) -> bytes:  # a DemoResult as the last expression of a cell shows its figure
        import io

        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=90)
        return buffer.getvalue()

    def save(self, path: str | Path) -> Path:
        """Write the figure (provenance footer and PNG metadata) and the data beside it (``.nc``); never
        overwrites."""
        from ..analysis import save_figure

        path = Path(path)
        data_path = path.with_suffix(".nc")
        for target in (path, data_path):
            if target.exists():
                raise ConfigError(f"{str(target)!r} exists; choose a new --out (nothing is overwritten).")
        if path.suffix.lower() != ".png":
            raise ConfigError(f"--out must name a .png file; got {str(path)!r}.")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(data_path, lambda tmp: self.data.to_netcdf(tmp, engine="scipy"), overwrite=False)
        return save_figure(self.figure, path, dict(self.data.attrs))


# teaching order: flows, ensembles, teachers, ...
ORDER = ("stack_to_ode", "error_accumulation", "ensemble_averaging", "teacher_angles", "smooth_vs_rough",
         "roughness_knob", "lesion_profiles", "llm_depth_fit")


def register(function: Callable[..., DemoResult]) -> Callable[..., DemoResult]:
    """Add a demo to :data:`DEMOS` (kept in :data:`ORDER`)."""
    DEMOS[function.__name__] = function
    ordered = {name: DEMOS[name] for name in ORDER if name in DEMOS}
    DEMOS.clear()
    DEMOS.update(ordered)
    return function


def finish(name: str, title: str, figure: Figure, data: xr.Dataset, started: float, config: dict[str, Any],
           seed: int) -> DemoResult:
    """Stamp provenance on the data and the figure's title, and time the demo."""
    data.attrs.update(provenance(config, seed=seed, experiment=f"demo:{name}"))
    figure.suptitle(title, fontsize=10)
    return DemoResult(name=name, title=title, figure=figure, data=data, seconds=time.perf_counter() - started)


def run_demo(name: str, **kwargs: Any) -> DemoResult:
    """Run the demo called ``name`` (``DEMOS`` lists them) with its keyword arguments."""
    check_choice("name", name, DEMOS)
    return DEMOS[name](**kwargs)

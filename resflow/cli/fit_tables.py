"""The exponents a toy run or fit prints: the separation first, then the fits with verdict v4, verdict v2
and the reasons a series is a bound -- every series named as a reader knows it (smooth / rough, the code name
beside it once)."""

from __future__ import annotations

from rich.table import Table

from .app import console
from .tables import print_table

__all__ = ["print_fits", "fits_table", "convergence_table", "separation_lines", "verdicts"]


def _interval(value: float, low: float, high: float) -> str:
    import math

    if not math.isfinite(value):
        return "–"
    if math.isnan(low) or math.isnan(high):
        return f"{value:.2f} [–]"

    def end(v: float) -> str:
        return f"{v:.2f}" if math.isfinite(v) else ("∞" if v > 0 else "−∞")

    return f"{value:.2f} [{end(low)}, {end(high)}]"


def _still_to_come(f) -> str:
    """The remaining drift's estimate and interval (verdict v4)."""
    import math

    if f.drift_case == "not checked":
        return "not checked"
    ends = [f"{v:+.3f}" if math.isfinite(v) else ("+∞" if v > 0 else "−∞")
            for v in (f.remaining_drift_low, f.remaining_drift_high)]
    return f"{f.remaining_drift:+.3f} [{ends[0]}, {ends[1]}]"


def separation_lines(separations) -> str:
    """The first answer of a run with both teachers: is the smooth teacher's exponent steeper, and does the
    gap reach the readings' law gap at the run's depths?"""
    return "\n".join(f"[bold]Separation[/]{'' if sep.scheme == 'euler' else f' ({sep.scheme})'}: {sep.text}"
                     for sep in separations)


def fits_table(fits, title: str) -> Table:
    """The exponents: plain and law-aware with their intervals (route error and remaining drift included),
    certified or a bound (verdict v4), the drift per doubling and what is still to come, the depths whose
    routes agree, the regime."""
    from resflow.analysis import Mentions

    series = Mentions().series
    table = Table(title=title)
    for column in ("series", "α [95%]", "law α [95%]", "standing", "drift per doubling [95%]",
                   "still to come [95%]", "routes agree at", "regime"):
        table.add_column(column)
    for f in fits:
        table.add_row(series(f), _interval(f.exponent, f.ci_low, f.ci_high),
                      _interval(f.law_exponent, f.law_ci_low, f.law_ci_high),
                      "certified" if f.exponent_certified else "[yellow]bound[/]",
                      _interval(f.drift_per_doubling, f.drift_per_doubling_low, f.drift_per_doubling_high),
                      _still_to_come(f), ", ".join(map(str, f.certified_depths)) or "none", f.regime)
    return table


def convergence_table(fits,
                      title: str = "Verdict v2 (has each route stopped improving?) and asymptotic estimates"
                      ) -> Table:
    """What verdict v2 was judged on, and the exponents of the extrapolated limits (labelled estimates)."""
    from resflow.analysis import Mentions

    series = Mentions().series
    table = Table(title=title)
    for column in ("series", "drift [90%]", "max gain", "converged (v2)", "asymptotic α [95%]",
                   "asymptotic law α [95%]", "points to"):
        table.add_column(column)
    for f in fits:
        gain = f.remaining_gain
        where = f.depths[max(range(len(f.gains)), key=lambda i: f.gains[i])] if f.gains else None
        table.add_row(series(f), _interval(f.drift, f.drift_low, f.drift_high),
                      "–" if gain != gain else ("no limit" if gain == float("inf")
                                                else f"{gain:.0%} (ℓ={where})"),
                      "yes" if f.converged else "no",
                      _interval(f.asymptotic_exponent, f.asymptotic_ci_low, f.asymptotic_ci_high),
                      _interval(f.asymptotic_law_exponent, f.asymptotic_law_ci_low,
                                f.asymptotic_law_ci_high),
                      f.asymptotic_regime)
    return table


def verdicts(fits) -> str:
    """Why each uncertified series' exponents are bounds (verdict v4), one line each."""
    from resflow.analysis import series_label

    return "\n".join(f"[yellow]{series_label(f)}[/]: {f.certificate}" for f in fits
                     if not f.exponent_certified)


def print_fits(fits, separations, title: str) -> None:
    """What a run or a fit prints: the separation first, then the exponents, verdict v2 and the reasons (the
    tables within the console's width: wrapped at spaces, or as lists)."""
    if separations:
        console.print(separation_lines(separations), highlight=False)
    print_table(fits_table(fits, title), console)
    print_table(convergence_table(fits), console)
    if any(not f.exponent_certified for f in fits):
        console.print(verdicts(fits), highlight=False)

"""Strong words in the docs are what a record says.

Every "converged", "certified", "refuted", "reproduces" or "follows the law" in README.md, docs/index.md,
docs/start.md, docs/results.md, docs/results/*.md, docs/interventions.md and docs/lm-ladder.md (not negated,
not a code name in backticks) names the record it rests on, ``<!-- record: ID -->`` on its line, and that record's fit rows -- what
``resflow fit STORE --json --run ID`` printed, kept in ``docs/records/ID.json`` -- must say it: "converged" needs
a series verdict v2 called converged, "certified" a certified series (or, with ``depths=2,4``, those depths
certified; with a series name, that series), "follows the law" a certified series.  A record cited by the docs
must exist under docs/records/.

A number is a claim too: every interval ``A [B, C]`` written on a line that cites a record (an exponent, a law
exponent, a separation) must be one of that record's intervals to the digits shown, so an interval that a
refit or a longer run changed cannot stay in the docs beside the record it no longer matches.
"""

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/index.md", "docs/start.md", "docs/results.md", "docs/interventions.md",
         "docs/lm-ladder.md", *sorted(f"docs/results/{p.name}" for p in (ROOT / "docs" / "results").glob("*.md"))]
RECORDS = ROOT / "docs" / "records"
WORD = re.compile(r"\b(converged|certified|refuted|reproduc(?:es|ed|e|ing)|follows? the (?:[\w-]+ )?law)\b",
                  re.IGNORECASE)
NEGATED = re.compile(r"(\bnot|\bnever|\bno|n't|\bnor|\bneither|\bun)[\w ,]{0,20}$", re.IGNORECASE)
CITE = re.compile(r"<!-- record: ([^ ]+)((?: [^ >]+)*) -->")


def claims(text: str):
    """(line number, word, the line) of every strong word that is a claim."""
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        plain = re.sub(r"`[^`]*`", "``", line)  # code names are not claims
        for match in WORD.finditer(plain):
            before = plain[: match.start()]
            if NEGATED.search(before[-28:]):
                continue
            yield number, match.group(1).lower(), line


def rows(record: str) -> list[dict]:
    path = RECORDS / f"{record}.json"
    assert path.exists(), f"cited record {record} has no docs/records/{record}.json (resflow fit STORE --json --run ID)"
    return json.loads(path.read_text())


def supported(word: str, record: str, options: list[str]) -> bool:
    series = [r for r in rows(record) if r.get("target") != "separation"]
    names = [o for o in options if "=" not in o]
    settings = dict(o.split("=", 1) for o in options if "=" in o)
    if names:
        series = [r for r in series if r["target"] in names]
    if not series:
        return False
    if word == "converged":
        return all(r["converged"] for r in series)
    if word == "certified" and "depths" in settings:
        wanted = {int(d) for d in settings["depths"].split(",")}
        return all(wanted <= set(r["certified_depths"]) for r in series)
    if word == "certified" or word.startswith("follow"):  # verdict v4's exponent_certified; v3's certified
        return all(r.get("exponent_certified", r.get("certified")) for r in series)
    return True  # "refuted", "reproduces": the record is named and exists


@pytest.mark.parametrize("page", PAGES)
def test_every_strong_word_names_a_record_that_says_it(page):
    problems = []
    for number, word, line in claims((ROOT / page).read_text()):
        cites = CITE.findall(line)
        if not cites:
            problems.append(f"{page}:{number}: '{word}' names no record (<!-- record: ID -->): {line.strip()[:100]}")
            continue
        if not any(supported(word, record, options.split()) for record, options in cites):
            problems.append(f"{page}:{number}: '{word}' is not what {[c[0] for c in cites]} says")
    assert not problems, "\n".join(problems)


def test_the_checker_catches_an_unsupported_word_and_accepts_a_negated_one(tmp_path):
    text = "The run converged.\nIt has not converged.\nThe field `converged` is a bool.\n```\nconverged\n```\n"
    assert [(n, w) for n, w, _ in claims(text)] == [(1, "converged")]
    found = [w for _, w, _ in claims("Routes reproduce it; the run follows the ensemble law; not reproduced.")]
    assert found == ["reproduce", "follows the ensemble law"]


INTERVAL = re.compile(r"(−?-?\d+\.\d+) \[(−?-?\d+\.\d+|−?∞), (−?-?\d+\.\d+|∞)\]")
TRIPLES = (("exponent", "ci_low", "ci_high"), ("law_exponent", "law_ci_low", "law_ci_high"),
           ("separation", "separation_ci_low", "separation_ci_high"),
           ("separation_law", "separation_law_ci_low", "separation_law_ci_high"),
           ("exponent", "replicate_ci_low", "replicate_ci_high"),
           ("asymptotic_exponent", "asymptotic_ci_low", "asymptotic_ci_high"))


def _number(text: str) -> float:
    text = text.replace("−", "-")
    return {"∞": math.inf, "-∞": -math.inf}.get(text, None) or float(text)


def record_intervals(record: str) -> list[tuple[float, float, float]]:
    """Every (value, low, high) a record's fit rows hold (None: an unbounded end)."""
    out = []
    for row in rows(record):
        for names in TRIPLES:
            if all(n in row for n in names) and row[names[0]] is not None:
                low = -math.inf if row[names[1]] is None else row[names[1]]
                high = math.inf if row[names[2]] is None else row[names[2]]
                out.append((row[names[0]], low, high))
    return out


def matches(quoted: tuple[str, str, str], held: tuple[float, float, float]) -> bool:
    """Whether an interval quoted with some digits is a held one rounded to them."""
    for text, value in zip(quoted, held, strict=True):
        number = _number(text)
        if math.isinf(number) or math.isinf(value):
            if number != value:
                return False
            continue
        digits = len(text.split(".")[1])
        if abs(number - value) > 0.5 * 10 ** -digits + 1e-9:
            return False
    return True


@pytest.mark.parametrize("page", PAGES)
def test_every_interval_beside_a_record_is_the_records(page):
    problems = []
    for number, line in enumerate((ROOT / page).read_text().splitlines(), 1):
        cites = CITE.findall(line)
        if not cites:
            continue
        kept = [record for record, _ in cites if (RECORDS / f"{record}.json").exists()]  # a sweep has no rows
        if not kept:
            continue
        held = [t for record in kept for t in record_intervals(record)]
        for quoted in INTERVAL.findall(line):
            if not any(matches(quoted, h) for h in held):
                problems.append(f"{page}:{number}: {quoted[0]} [{quoted[1]}, {quoted[2]}] is not an interval of "
                                f"{[c[0] for c in cites]}")
    assert not problems, "\n".join(problems)


def test_the_interval_check_catches_a_stale_interval():
    held = [(1.036, 1.005, 1.988)]
    assert matches(("1.04", "1.01", "1.99"), held[0]) and matches(("1.04", "1.00", "1.99"), (1.036, 1.004, 1.99))
    assert not matches(("1.04", "1.01", "1.08"), held[0])  # the v3 interval of the same exponent
    assert matches(("2.59", "2.45", "∞"), (2.587, 2.447, math.inf))

"""Strong words in the docs are what a record says.

Every "converged", "certified", "refuted", "reproduces" or "follows the law" in README.md, docs/index.md,
docs/results.md, docs/interventions.md and docs/lm-ladder.md (not negated, not a code name in backticks) names
the record it rests on, ``<!-- record: ID -->`` on its line, and that record's fit rows -- what
``resflow fit STORE --json --run ID`` printed, kept in ``docs/records/ID.json`` -- must say it: "converged" needs
a series verdict v2 called converged, "certified" a certified series (or, with ``depths=2,4``, those depths
certified; with a series name, that series), "follows the law" a certified series.  A record cited by the docs
must exist under docs/records/.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/index.md", "docs/results.md", "docs/interventions.md", "docs/lm-ladder.md"]
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
    if word == "certified" or word.startswith("follow"):
        return all(r["certified"] for r in series)
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

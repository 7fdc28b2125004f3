"""How many causes gpudoctor names on real pastes from public issue threads (fixtures/pastes, docs/pastes.md).

    python benchmarks/pastes.py [--verbose] [--min 0.9]

Each paste is read as `gpudoctor check --from PASTE` reads it (in process). A paste with a cause counts as named when
every rule its label lists fires (at the label's `severity`, where it gives one); a healthy one counts when no error
or warning is reported. Prints one line per paste that misses, the score per class, on the pastes of the latest round
(`added` in the label) apart from the older ones, and overall; exits 1 when the score is under --min.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PASTES = ROOT / "fixtures" / "pastes"


@dataclass(frozen=True)
class Outcome:
    file: str
    source: str
    klass: str
    added: int  # the round the paste was added in (0: before rounds were recorded)
    healthy: bool
    ok: bool
    wanted: Tuple[str, ...]
    reported: Tuple[str, ...]  # rules with a finding ("GD104:error")


def atlas_sources() -> set:
    """The threads the message atlas took its samples from (a paste from one of them does not test the atlas apart)."""
    from gpudoctor.ingest.atlas import messages

    return {sample.source for message in messages() for sample in message.samples}


def labels() -> List[dict]:
    with open(PASTES / "labels.toml", "rb") as handle:
        return tomllib.load(handle)["paste"]


def judge(label: dict) -> Outcome:
    from gpudoctor.api import evaluate
    from gpudoctor.errors import InputError
    from gpudoctor.ingest.source import snapshot_from_reports
    from gpudoctor.model import Severity

    try:
        report = evaluate(snapshot_from_reports([str(PASTES / label["file"])]))
    except InputError:  # refused: nothing named
        return Outcome(label["file"], label["source"], label["class"], label.get("added", 0), label["healthy"], False,
                       tuple(label["rules"]), ("refused",))
    fired = {f.rule for f in report.findings}
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    wanted = tuple(label["rules"])
    if label.get("severity"):  # the wanted rules fire at this severity, no louder, no softer
        fired = {f.rule for f in report.findings if f.severity.name.lower() == label["severity"]}
    ok = not loud if label["healthy"] else bool(wanted) and all(rule in fired for rule in wanted)
    return Outcome(label["file"], label["source"], label["class"], label.get("added", 0), label["healthy"], ok, wanted,
                   tuple(sorted(f"{f.rule}:{f.severity.name.lower()}" for f in report.findings)))


def score(outcomes: List[Outcome]) -> float:
    return sum(o.ok for o in outcomes) / len(outcomes) if outcomes else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="a line for every paste, not only the misses")
    parser.add_argument("--min", type=float, default=0.0, help="exit 1 under this score (0 to 1)")
    args = parser.parse_args()
    outcomes = [judge(label) for label in labels()]
    for o in outcomes:
        if args.verbose or not o.ok:
            want = "healthy" if o.healthy else " ".join(o.wanted)
            print(f"{'ok  ' if o.ok else 'MISS'} {o.file}: wanted {want}; reported {' '.join(o.reported) or 'nothing'}")
    classes = sorted({o.klass for o in outcomes})
    for klass in classes:
        mine = [o for o in outcomes if o.klass == klass]
        print(f"{klass:32} {sum(o.ok for o in mine):3}/{len(mine)}")
    causes = [o for o in outcomes if not o.healthy]
    healthy = [o for o in outcomes if o.healthy]
    apart = [o for o in outcomes if o.source not in atlas_sources()]
    print(f"from threads that gave the message atlas no sample: {sum(o.ok for o in apart)}/{len(apart)}")
    latest = max(o.added for o in outcomes)
    new, old = [o for o in outcomes if o.added == latest], [o for o in outcomes if o.added != latest]
    if latest and old:
        print(f"added this round (round {latest}): {sum(o.ok for o in new)}/{len(new)}, score {score(new):.1%}; "
              f"older: {sum(o.ok for o in old)}/{len(old)}, score {score(old):.1%}")
    print(f"causes named: {sum(o.ok for o in causes)}/{len(causes)}; healthy without error or warning: "
          f"{sum(o.ok for o in healthy)}/{len(healthy)}; score {score(outcomes):.1%}")
    return 0 if score(outcomes) >= args.min else 1


if __name__ == "__main__":
    raise SystemExit(main())

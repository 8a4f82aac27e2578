"""A finished cross-validation as one JSON record for a results page: its ``cv.json`` summary
and each fold's score, best epoch (and step) and seconds, from its ``fold.json``.

    .venv/bin/python benchmarks/cv_record.py RUN_DIR OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def record(run: Path) -> dict:
    summary = json.loads((run / "cv.json").read_text(encoding="utf-8"))
    folds = {}
    for name in summary["folds"]:
        fold = json.loads((run / "folds" / name / "fold.json").read_text(encoding="utf-8"))
        kept = ("score", "best_epoch", "best_step", "seconds")
        folds[name] = {key: fold[key] for key in kept if key in fold}
    return {"summary": summary, "folds": folds}


def main() -> None:
    run, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.write_text(json.dumps(record(run), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

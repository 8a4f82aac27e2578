"""The README's building-blocks example runs as printed."""

import re
from pathlib import Path


def test_readme_building_blocks_example_runs():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "CRF(" in b)
    namespace: dict = {}
    exec(example, namespace)
    assert namespace["out"].states.shape == (2, 7, 256)
    assert namespace["pooled"].weights[1, 3:].abs().sum() == 0
    assert namespace["best"].shape == (2, 7)

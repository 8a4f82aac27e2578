"""Raw-text tokenisation loads NLTK's two tokenizers without the rest of NLTK (whose package
import pulls scikit-learn, pandas and SciPy and cost more than torch at every raw-text
``predict``), tokenises exactly as the fully imported NLTK does, and leaves ``import nltk``
working as usual afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

TEXT = 'Mr. Smith went to Washington on Jan. 5th. He didn\'t stay; it cost $5.00! "Why?" he asked.'

PROBE = f"""
import json, sys
from bistack.data.tokenize import _ABBREVIATIONS, tokenize
tokens = [[[t.text, t.start, t.end] for t in s] for s in tokenize({TEXT!r})]
heavy = sorted(m for m in ("sklearn", "pandas", "scipy") if m in sys.modules)
left = [m for m in sys.modules if m == "nltk" or m.startswith("nltk.")]
import nltk
from nltk.tokenize import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
parameters = PunktParameters()
parameters.abbrev_types = set(_ABBREVIATIONS.split())
full = [
    [(s[a:b], start + a, start + b) for a, b in NLTKWordTokenizer().span_tokenize(s)]
    for start, end in PunktSentenceTokenizer(parameters).span_tokenize({TEXT!r})
    for s in [{TEXT!r}[start:end]]
]
whole = hasattr(nltk, "classify") and hasattr(nltk.tokenize, "word_tokenize")
print(json.dumps([tokens, heavy, left, whole, tokens == [[list(t) for t in s] for s in full]]))
"""


def test_tokenizing_loads_no_more_of_nltk_than_its_tokenizers_and_tokenizes_alike():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    tokens, heavy, left, whole, same = json.loads(done.stdout)
    assert heavy == [] and left == []  # nothing of NLTK stays registered under the bare name
    assert whole  # a later ``import nltk`` is the whole package
    assert same and [t[0] for t in tokens[1]][:4] == ["He", "did", "n't", "stay"]

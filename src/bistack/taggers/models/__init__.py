"""The taggers users load (``Tagger``, ``LayerPoolingTagger``), the pipeline from their emissions
to what they predict, and what they write: records, output formats and the evaluation report."""

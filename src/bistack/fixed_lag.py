"""Online CRF decoding for streaming taggers: each tag is committed a fixed lag after its token.

With lag 0 the decoder is greedy: a token's tag is the best one given the previous committed
tag and the transition scores. With lag k it waits for k more tokens and commits the tag the
best path over everything seen so far gives the waiting position (later tokens can no longer
change it). On flush, the tail is decoded with Viterbi, end transitions included; a lag at
least the sequence length is therefore exact Viterbi.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bistack.crf import CRF


class FixedLagDecoder:
    """Decodes one sequence as its emissions arrive."""

    def __init__(self, crf: CRF, lag: int) -> None:
        if lag < 0:
            raise ValueError(f"lag must be >= 0, got {lag}")
        with torch.no_grad():
            transitions, start, end = crf.constrained_scores()
        self.transitions, self.start, self.end = transitions, start, end
        self.lag = lag
        self.emissions: list[Tensor] = []
        self.committed: list[int] = []

    def push(self, emission: Tensor) -> list[int]:
        """Add one position's emission scores ``(num_tags,)``; return the tags now committed."""
        self.emissions.append(emission.detach())
        newly = []
        while len(self.emissions) - 1 - len(self.committed) >= self.lag:
            tag = self._best_tail(final=False)[0]
            self.committed.append(tag)
            newly.append(tag)
        return newly

    def flush(self) -> list[int]:
        """End of the sequence: commit every waiting position (Viterbi with end scores)."""
        if len(self.committed) == len(self.emissions):
            return []
        tail = self._best_tail(final=True)
        self.committed.extend(tail)
        return tail

    def _best_tail(self, final: bool) -> list[int]:
        """Best tags for the uncommitted positions, given the committed prefix."""
        emissions = torch.stack(self.emissions[len(self.committed) :])  # (n, num_tags)
        if self.committed:
            score = self.transitions[self.committed[-1]] + emissions[0]
        else:
            score = self.start + emissions[0]
        backpointers = []
        for emission in emissions[1:]:
            candidates = score.unsqueeze(1) + self.transitions  # (from, to)
            score, best_from = candidates.max(dim=0)
            score = score + emission
            backpointers.append(best_from)
        if final:
            score = score + self.end
        tag = int(score.argmax())
        path = [tag]
        for best_from in reversed(backpointers):
            tag = int(best_from[tag])
            path.append(tag)
        return path[::-1]


def decode_with_lag(crf: CRF, emissions: Tensor, mask: Tensor, lag: int) -> list[list[int]]:
    """Fixed-lag decoding of whole sequences, as a stream would decode them.

    emissions ``(batch_size, seq_len, num_tags)``, mask ``(batch_size, seq_len)`` -> tag lists.
    """
    paths = []
    for row, length in enumerate(mask.sum(dim=1).tolist()):
        decoder = FixedLagDecoder(crf, lag)
        for position in range(length):
            decoder.push(emissions[row, position])
        decoder.flush()
        paths.append(decoder.committed)
    return paths

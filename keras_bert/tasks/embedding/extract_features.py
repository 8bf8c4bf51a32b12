"""Feature extraction as google-research/bert's ``extract_features.py`` does it: one input line per
example (``text`` or ``text_a ||| text_b``), one JSON line out per example with, for every token
(``[CLS]`` and ``[SEP]`` included, padding not), the values of the requested layers."""

from __future__ import annotations

import collections
import json
import logging
import re
from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from keras_bert.fileio import atomic_write
from keras_bert.errors import DataError
from keras_bert.fileio import read_text_lines

logger = logging.getLogger(__name__)

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


BATCH_SIZE = 32  # examples per forward pass: Google's extract_features.py --batch_size

def read_feature_inputs(path: str) -> list[tuple[str, str | None]]:
    """(text_a, text_b or None) per line, split at `` ||| `` as extract_features.py does.

    Raises:
        DataError: an empty line (Google's script would emit an example of just [CLS] [SEP]).
    """
    examples = []
    for line_number, line in enumerate(read_text_lines(path), start=1):
        line = line.strip()
        if not line:
            raise DataError("empty line; write one text (or 'text_a ||| text_b') per line",
                            path, line_number)
        match = _PAIR.match(line)
        examples.append((match.group(1), match.group(2)) if match else (line, None))
    return examples


def feature_record(index: int, tokens: Sequence[str], layer_values, layers: Sequence[int]
                   ) -> collections.OrderedDict:
    """One output line: ``{"linex_index", "features": [{"token", "layers": [{"index",
    "values"}]}]}`` with values rounded to 6 decimals, as extract_features.py writes them.

    Args:
        index: the input line's index (from 0).
        tokens: the example's tokens, [CLS] first and the last [SEP] last.
        layer_values: float [len(tokens), len(layers), hidden].
        layers: the layer indexes, in output order.
    """
    features = []
    for position, token in enumerate(tokens):
        features.append(collections.OrderedDict(token=token, layers=[
            collections.OrderedDict(index=int(layer),
                                    values=[round(float(v), 6) for v in layer_values[position, j]])
            for j, layer in enumerate(layers)]))
    return collections.OrderedDict(linex_index=index, features=features)


def extract_features(init_checkpoint: str, input_file: str, output_file: str,
                     layers: Sequence[int] = (-1, -2, -3, -4), max_seq_length: int = 128,
                     batch_size: int = BATCH_SIZE, lower_case: bool | None = None,
                     progress: bool = True) -> int:
    """Writes the JSON Lines features of every line of ``input_file`` to ``output_file``.

    Args:
        init_checkpoint: a Google, Hugging Face or keras-bert checkpoint with its vocab.txt.
        input_file: one example per line; ``a ||| b`` for a pair.
        output_file: the JSON Lines output (written to a temporary name, then renamed).
        layers: which layers to output, negative from the top (Google's default -1,-2,-3,-4).
        max_seq_length: inputs are truncated to this many tokens (Google's pair truncation).
        batch_size: examples per forward pass.
        lower_case: override the checkpoint's casing.
        progress: show a progress bar.

    Returns:
        The number of examples written.
    """
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.tasks.embedding.model import BertEmbedder
    from keras_bert.tokenization import BertTokenizer

    examples = read_feature_inputs(input_file)
    tokenizer = BertTokenizer.from_pretrained(init_checkpoint, lower_case=lower_case)
    embedder = BertEmbedder(BertEncoder.from_pretrained(init_checkpoint),
                            feature_layers=list(layers))
    hidden = embedder.encoder.bert_config.hidden_size
    with atomic_write(output_file) as writer, tqdm(
            total=len(examples), disable=not progress, unit="example") as bar:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start:start + batch_size]
            rows = [tokenizer.encode(a, b, seq_length=max_seq_length) for a, b in chunk]
            packed = {name: np.asarray([r[name] for r in rows], dtype=np.int32)
                      for name in rows[0]}
            values = embedder.predict(packed, verbose=0)["token_features"]
            for row, index in enumerate(range(start, start + len(chunk))):
                length = int(packed["input_mask"][row].sum())
                tokens = tokenizer.convert_ids_to_tokens(
                    packed["input_word_ids"][row, :length])
                per_layer = values[row, :length].reshape(length, len(layers), hidden)
                writer.write(json.dumps(feature_record(index, tokens, per_layer, layers))
                             + "\n")
            bar.update(len(chunk))
    logger.info("wrote features of %d examples to %s", len(examples), output_file)
    return len(examples)


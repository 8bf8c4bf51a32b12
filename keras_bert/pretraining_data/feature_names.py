"""The feature names of BERT pretraining records (no TensorFlow needed: the writer uses them).

Google's create_pretraining_data.py writes the original names; TF Model Garden's v2 records
rename two of them. See `keras_bert.pretraining.schema` for the spec and the parser.
"""

from __future__ import annotations

# Feature names in the order Google's create_pretraining_data.py writes them.
ORIGINAL_FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                          "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
# TF Model Garden's names for the two features it renames.
V2_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def feature_names(v2_feature_names: bool = False) -> dict[str, str]:
    """Maps each original feature name to the name written in the record."""
    return {name: V2_RENAMES.get(name, name) if v2_feature_names else name
            for name in ORIGINAL_FEATURE_NAMES}

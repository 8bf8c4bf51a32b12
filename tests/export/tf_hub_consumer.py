"""A TF Hub user of our exported pair, as TensorFlow's tutorials are written: tensorflow,
tensorflow-text, tensorflow-hub and tf-keras (``TF_USE_LEGACY_KERAS=1``), and no keras_bert
(importing it fails here). Run as a script by tests/test_export_tf_hub*.py:

    python tests/export/tf_hub_consumer.py HUB_DIR OUT MODE [TEXT ...]

It writes what it saw to OUT.npz (arrays) and OUT.json (ids, names, counts) for the tests to
compare with keras_bert's own tokenizer and models. MODE ``no-text`` loads the encoder only,
with tensorflow-text made unimportable; MODE ``text`` runs every call of the API (see the
sections below); MODE ``mlm`` also fills the mask with ``encoder.mlm``.
"""

import json
import os
import sys

sys.modules["keras_bert"] = None  # a TF Hub user has no keras_bert
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # hub.KerasLayer is a tf-keras layer, as in the tutorials
hub_dir, out, mode, texts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if mode == "no-text":
    sys.modules["tensorflow_text"] = None
else:
    import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_hub as hub  # noqa: E402

arrays, facts = {}, {"keras": tf.keras.__name__}
encoder = hub.load(os.path.join(hub_dir, "encoder"))
facts["encoder_has_mlm"] = hasattr(encoder, "mlm")
facts["regularization_losses"] = len(encoder.regularization_losses)
facts["trainable_variables"] = len(encoder.trainable_variables)
ids = dict(np.load(out + ".in.npz")) if os.path.exists(out + ".in.npz") else None
if ids is not None:
    outputs = encoder({k: tf.constant(v) for k, v in ids.items()})
    arrays.update(ids_pooled=outputs["pooled_output"], ids_default=outputs["default"],
                  ids_layers=np.stack(outputs["encoder_outputs"], 1))

if mode != "no-text":
    preprocess = hub.load(os.path.join(hub_dir, "preprocess"))
    batch = tf.constant(texts)
    facts["lower_case"] = bool(preprocess.do_lower_case.numpy())

    # --- tokenize and its special tokens
    tokens = preprocess.tokenize(batch)
    facts["tokens"] = tokens.to_list()
    facts["tokens_ragged_rank"] = tokens.ragged_rank
    facts["special_tokens"] = {k: int(v) for k, v in
                               preprocess.tokenize.get_special_tokens_dict().items()}
    facts["special_tokens_dtypes"] = sorted({v.dtype.name for v in
                                             preprocess.tokenize.get_special_tokens_dict().values()})
    with_offsets = preprocess.tokenize_with_offsets
    facts["tokens_with_offsets"] = [part.to_list() for part in with_offsets(batch)]
    facts["offsets_dtypes"] = [part.dtype.name for part in with_offsets(batch)]
    facts["special_tokens_with_offsets"] = {
        k: int(v) for k, v in with_offsets.get_special_tokens_dict().items()}

    # --- bert_pack_inputs: 1 or 2 segments, ragged rank 1 or 2, seq_length omitted, a Python
    # int or a scalar tensor, and through hub.KerasLayer(arguments=...) as the API page shows
    flat = tokens.merge_dims(1, 2)
    reverse = tf.ragged.constant([row[::-1] for row in flat.to_list()], dtype=tf.int32)
    pack = preprocess.bert_pack_inputs
    packs = {
        "default": preprocess(batch),
        "single_words_omitted": pack([tokens]),
        "single_flat_64": pack([flat], seq_length=64),
        "pair_words_tensor_9": pack([tokens, tokens], seq_length=tf.constant(9)),
        "pair_flat_keras_40": hub.KerasLayer(pack, arguments=dict(seq_length=40))([flat, reverse]),
    }
    for name, packed in packs.items():
        for key, value in packed.items():
            arrays[f"pack.{name}.{key}"] = value
    try:
        pack([tokens, tokens], seq_length=2)
        facts["pair_seq_length_2"] = "packed"
    except tf.errors.InvalidArgumentError as e:
        facts["pair_seq_length_2"] = e.message

    # --- the encoder on text: hub.load, and hub.KerasLayer(trainable=True) with and without
    # training (dropout), in the API page's Keras form for a pair of segments
    packed = packs["default"]
    outputs = encoder(packed)
    arrays.update(pooled=outputs["pooled_output"], default=outputs["default"],
                  sequence=outputs["sequence_output"],
                  layers=np.stack(outputs["encoder_outputs"], 1))
    layer = hub.KerasLayer(os.path.join(hub_dir, "encoder"), trainable=True)
    for run in (1, 2):
        arrays[f"keras_inference_{run}"] = layer(packed, training=False)["pooled_output"]
        arrays[f"keras_training_{run}"] = layer(packed, training=True)["pooled_output"]
    facts["keras_layer_trainable_weights"] = len(layer.trainable_weights)
    facts["keras_layer_losses"] = len(layer.losses)

    text_a = tf.keras.layers.Input(shape=(), dtype=tf.string)
    text_b = tf.keras.layers.Input(shape=(), dtype=tf.string)
    tokenize = hub.KerasLayer(preprocess.tokenize)
    bert_pack_inputs = hub.KerasLayer(pack, arguments=dict(seq_length=40))
    pair_inputs = bert_pack_inputs([tokenize(text_a), tokenize(text_b)])
    pair_outputs = hub.KerasLayer(os.path.join(hub_dir, "encoder"), trainable=True)(pair_inputs)
    pair_model = tf.keras.Model([text_a, text_b], pair_outputs["pooled_output"])
    arrays["keras_pair_pooled"] = pair_model([batch, batch[::-1]])

    # One fine-tuning step through hub.KerasLayer: every encoder variable gets a gradient.
    with tf.GradientTape() as tape:
        pooled = layer(packed, training=True)["pooled_output"]
        loss = tf.reduce_sum(tf.keras.layers.Dense(1)(pooled))
    gradients = tape.gradient(loss, layer.trainable_weights)
    facts["variables_with_gradients"] = sum(g is not None for g in gradients)

if mode == "mlm":
    # Fill the mask, as TF Hub's masked-LM examples do: [MASK] replaces a word of the
    # tokenized text (the preprocessing tokenizes the literal "[MASK]" as ordinary text).
    special = preprocess.tokenize.get_special_tokens_dict()
    mask_id = int(special["mask_id"])
    words = preprocess.tokenize(tf.constant(texts[:1])).to_list()
    masked_word = 3
    words[0][masked_word] = [mask_id]
    packed = preprocess.bert_pack_inputs([tf.ragged.constant(words, dtype=tf.int32)])
    positions = tf.cast(tf.where(packed["input_word_ids"][0] == mask_id), tf.int32)
    mlm_inputs = dict(packed, masked_lm_positions=tf.transpose(positions))
    mlm_outputs = encoder.mlm(mlm_inputs)
    arrays.update(mlm_input_word_ids=packed["input_word_ids"],
                  mlm_positions=mlm_inputs["masked_lm_positions"],
                  mlm_logits=mlm_outputs["mlm_logits"], mlm_pooled=mlm_outputs["pooled_output"],
                  mlm_training=encoder.mlm(mlm_inputs, training=True)["mlm_logits"])
    with tf.io.gfile.GFile(encoder.vocab_file.asset_path.numpy()) as f:
        vocabulary = [line.rstrip("\n") for line in f]
    facts["filled"] = vocabulary[int(tf.argmax(mlm_outputs["mlm_logits"][0, 0]))]
    facts["mlm_output_names"] = sorted(mlm_outputs)
    mlm_layer = hub.KerasLayer(encoder.mlm, trainable=True)
    arrays["mlm_keras_layer"] = mlm_layer(mlm_inputs, training=False)["mlm_logits"]
    facts["mlm_keras_layer_trainable_weights"] = len(mlm_layer.trainable_weights)
    facts["mlm_trainable_variables"] = len(encoder.mlm.trainable_variables)
    facts["mlm_regularization_losses"] = len(encoder.mlm.regularization_losses)

np.savez(out + ".npz", **{k: np.asarray(v) for k, v in arrays.items()})
with open(out + ".json", "w") as f:
    json.dump(facts, f)

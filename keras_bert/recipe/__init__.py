"""BERT's fine-tuning recipe (Devlin et al., 2018, section 4 and appendix A.3), apart from the
models it trains: ``inputs`` (packed ids of any integer dtype as int32, texts checked),
``batches`` (examples tokenized once, batches of rows of similar length, each epoch a function
of (seed, epoch)), ``plan`` (one run's data, steps, AdamW on its schedule and
epoch hook) and ``fit`` (a run: what ``BertTask.fit``, ``keras-bert finetune`` and
``keras_bert.distill`` hand a model to). The recipe reaches a model only through the hooks it
offers (``to_arrays``, ``traced_pack_batch``, ``make_dataset``, ``adapt``,
``learning_rate_multipliers``, ``token_level_labels``, its strategy) and Keras' own API, and
imports no model class; its defaults are ``keras_bert.config.FinetuneSettings``."""

"""The shipped configs parse with TF Serving's protos, and the compose file runs the official
image with flags the local server accepts too, pointing at the same files."""

import os
import re

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from keras_bert.serving import config_files as config_lib
from keras_bert.serving.server import build_flag_parser

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "serving", "configs")
COMPOSE = os.path.join(CONFIGS, "..", "docker-compose.yml")


def test_model_config_parses_with_tf_serving_protos():
    config = config_lib.load_model_server_config(os.path.join(CONFIGS, "models.config"))
    models = {m.name: m for m in config.model_config_list.config}
    assert set(models) == {"bert_encoder", "bert_classifier"}
    assert models["bert_encoder"].base_path == "/models/bert_encoder"
    assert models["bert_encoder"].model_version_policy.latest.num_versions == 1
    assert models["bert_classifier"].model_version_policy.latest.num_versions == 2
    # The same text through the generated proto class directly.
    with open(os.path.join(CONFIGS, "models.config")) as f:
        text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())


def test_batching_parameters_parse():
    path = os.path.join(CONFIGS, "batching_parameters.txt")
    options = config_lib.load_batching_options(path)
    assert (options.max_batch_size, options.batch_timeout_micros, options.max_enqueued_batches,
            options.num_batch_threads) == (32, 2000, 100, 4)
    # Field numbers are upstream's (session_bundle_config.proto): max_batch_size is field 1.
    params = config_lib.read_text_proto(path, config_lib.BatchingParameters())
    assert params.SerializeToString().startswith(b"\n\x02\x08\x20")


def test_compose_runs_the_official_image_with_the_same_files():
    with open(COMPOSE) as f:
        compose = f.read()
    assert re.search(r"image: tensorflow/serving:", compose)
    flags = re.findall(r"^\s+- (--[a-z_]+=\S+)$", compose, flags=re.MULTILINE)
    mounts = dict(re.findall(r"^\s+- (\S+):(/\w+)(?::ro)?$", compose, flags=re.MULTILINE))
    assert mounts["./configs"] == "/config"
    args = build_flag_parser().parse_args(flags)
    for container_path in (args.model_config_file, args.batching_parameters_file):
        local = container_path.replace("/config", CONFIGS, 1)
        assert os.path.exists(local), container_path
    assert args.enable_batching and args.file_system_poll_wait_seconds == 5

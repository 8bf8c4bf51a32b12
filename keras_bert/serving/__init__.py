"""The local model server: speaks TF Serving's gRPC and REST protocols, takes
tensorflow_model_server's flags and reads the same model config and batching files.

Run it with ``keras-bert serve`` (``keras_bert.serving.server.main``); serving/README.md in the
repository documents it, next to the TF Serving configs and docker-compose file it shares.
"""

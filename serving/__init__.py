"""A local model server that speaks TF Serving's gRPC and REST protocols, its client and configs.

Run it with ``python -m serving.server`` (flags as tensorflow_model_server's); see README.md.
"""

"""What an operator reads and copies to serve keras-bert exports: TF Serving's model config and
batching files (configs/), docker-compose.yml and README.md. Nothing here is installed.

The local model server is ``keras_bert.serving``, run with ``keras-bert serve``. ``server.py``
and ``client.py`` here only keep ``python -m serving.server`` and ``python -m serving.client``
working from a checkout for one more release; each warns that it is deprecated.
"""

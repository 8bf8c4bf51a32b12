"""SavedModel export for TF Serving: raw-text ``serving_default`` and packed-id ``serve_ids``
signatures, TF Hub's encoder interface, versioned atomic layout and an op check; plus a client
for TF Serving (or ``serving/``) over gRPC and REST. The names below load TensorFlow on first
use."""

from keras_bert.lazy import lazy_attributes

__all__ = ["TaskExport", "check_ops", "export_model", "export_tf_hub", "next_version",
           "register", "saved_model_op_types"]
__getattr__, __dir__ = lazy_attributes(__name__, {
    "check_ops": "keras_bert.export.ops",
    "saved_model_op_types": "keras_bert.export.ops",
    "export_model": "keras_bert.export.saved_model",
    "next_version": "keras_bert.export.saved_model",
    "TaskExport": "keras_bert.export.signatures",
    "register": "keras_bert.export.signatures",
    "export_tf_hub": "keras_bert.export.tf_hub",
})

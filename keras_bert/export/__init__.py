"""SavedModel export for TF Serving: raw-text ``serving_default`` and packed-id ``serve_ids``
signatures, TF Hub's encoder interface, versioned atomic layout and an op check; plus a client
for TF Serving (or ``serving/``) over gRPC and REST."""

from keras_bert.export.ops import check_ops, saved_model_op_types
from keras_bert.export.saved_model import export_model, next_version
from keras_bert.export.signatures import TaskExport, register
from keras_bert.export.tf_hub import export_tf_hub

__all__ = ["TaskExport", "check_ops", "export_model", "export_tf_hub", "next_version",
           "register", "saved_model_op_types"]

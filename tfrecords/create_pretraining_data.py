"""Writes BERT pretraining TFRecords from raw text; see tfrecords/README.md.

A drop-in for google-research/bert's create_pretraining_data.py (same flags and defaults), with
--output_dir/--num_shards, --num_workers, --gzip, --v2_feature_names and --window_bytes added.
The work is done by `keras_bert.pretraining_data.writer`; `keras-bert pretraining-data` is the same.
"""

import argparse
import logging
import os
import sys

try:
    from keras_bert.cli import pretraining_data as cli
except ModuleNotFoundError:  # running from a checkout that is not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_bert.cli import pretraining_data as cli


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=cli.DESCRIPTION)
    cli.add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return cli.run(args)
    except (ValueError, OSError) as e:  # OSError: missing or unwritable paths
        print(f"create_pretraining_data.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``python -m keras_bert.cli``: the ``keras-bert`` command."""

import sys

from keras_bert.cli import main

if __name__ == "__main__":
    sys.exit(main())

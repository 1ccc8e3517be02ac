"""The command lines of the Python benches: positional arguments, then ``--options`` with
defaults, each option's type that of its default.

    args = parse("FILE", rounds=5, batch_size=256)    # FILE [--rounds 5] [--batch-size 256]
"""

import argparse


def parse(*positional, **options):
    """``sys.argv`` parsed: the ``positional`` arguments (``args.file`` for ``"FILE"``), then an
    ``--option`` per keyword (``--batch-size`` for ``batch_size``) of its default's type."""
    parser = argparse.ArgumentParser()
    for name in positional:
        parser.add_argument(name.lower(), metavar=name)
    for name, default in options.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return parser.parse_args()

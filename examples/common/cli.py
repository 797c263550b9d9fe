"""The command line every example script shares."""

import argparse
import sys


def example_parser(description):
    """An `argparse.ArgumentParser` with `description` whose `--help`
    shows every argument's default."""
    return argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )


def add_data_dir(parser, holds):
    """`--data-dir`: a local copy of the example's data (`holds` says which
    files); without it the script downloads the canonical files and checks
    their SHA-256."""
    parser.add_argument(
        "--data-dir",
        default=None,
        help=f"directory with {holds}; default: download it (checked by SHA-256)",
    )


def status(*parts, sep=" "):
    """Print a status line (progress, setup, where files went) to standard
    error, so standard output holds only an example's results: e.g.
    `nmt_transformer.py --translate < src.txt > hyp.txt` writes one line
    per source line and nothing else."""
    print(*parts, sep=sep, file=sys.stderr, flush=True)

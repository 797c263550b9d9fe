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


def add_no_check_hash(parser, help):
    """`--no-check-hash`: accept data files whose SHA-256 is not the
    canonical one; `help` says what that lets in."""
    parser.add_argument("--no-check-hash", action="store_true", help=help)


def add_output_dir(parser, default, help=None):
    """`--output-dir`, `default` unless given; `help` says what goes there."""
    parser.add_argument("--output-dir", default=default, help=help)


def add_seed(parser, default=1337, help="random seed"):
    """`--seed`, an int (1337, nanoGPT's, unless the script picks another)."""
    parser.add_argument("--seed", type=int, default=default, help=help)


def add_smoke(parser, help):
    """`--smoke`: a tiny run, for the tests; `help` says how tiny
    (`apply_smoke` sets the values)."""
    parser.add_argument("--smoke", action="store_true", help=help)


TRANSFORMER_SIZE_HELP = {
    "hidden_dim": "model width",
    "num_heads": "attention heads",
    "num_layers": "Transformer blocks",
    "intermediate_dim": "feed-forward width",
    "dropout": "dropout rate",
}


def add_transformer_size(parser, help=None, **defaults):
    """The size of a Transformer: `--hidden-dim`, `--num-heads`,
    `--num-layers`, `--intermediate-dim` (ints) and `--dropout` (a float),
    each only where `defaults` gives its default (e.g. `hidden_dim=128`).
    `help` replaces the help of some, e.g. `{"hidden_dim": "d_model"}`."""
    unknown = set(defaults) - set(TRANSFORMER_SIZE_HELP)
    if unknown:
        raise ValueError(f"Unknown Transformer size flags: {sorted(unknown)}")
    texts = TRANSFORMER_SIZE_HELP | (help or {})
    for name in TRANSFORMER_SIZE_HELP:  # always in this order
        if name in defaults:
            parser.add_argument(
                f"--{name.replace('_', '-')}",
                type=float if name == "dropout" else int,
                default=defaults[name],
                help=texts[name],
            )


def transformer_size(args):
    """The Transformer size flags of `args` (those `add_transformer_size`
    added) as keyword arguments of the same names, e.g. `{"num_heads": 4,
    "dropout": 0.1}`: what the flags say, handed to the model that reads
    them."""
    return {
        name: getattr(args, name)
        for name in TRANSFORMER_SIZE_HELP
        if hasattr(args, name)
    }


def add_iterations(
    parser,
    iterations,
    eval_interval,
    help="training iterations",
    interval_help="iterations between validations and backups",
):
    """`--iterations` and `--eval-interval`, which must divide it
    (`check_iterations`): training in `iterations // eval_interval` epochs
    of `eval_interval` steps, a log row and a backup after each."""
    parser.add_argument("--iterations", type=int, default=iterations, help=help)
    parser.add_argument(
        "--eval-interval",
        type=int,
        default=eval_interval,
        help=f"{interval_help} (divides --iterations)",
    )


def check_iterations(parser, args):
    """A usage error unless `--eval-interval` divides `--iterations`."""
    if args.iterations % args.eval_interval:
        parser.error("--eval-interval must divide --iterations")


def check_positive(parser, args, names):
    """A usage error unless each argument of `names` (e.g. `"batch_size"`)
    is at least 1."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive")


def given_flags(argv=None):
    """The names (`batch_size`) of the flags on the command line `argv`
    (default `sys.argv[1:]`): `--batch-size 8`, `--batch-size=8`, and
    `--no-jit-compile` for `jit_compile`."""
    argv = sys.argv[1:] if argv is None else argv
    names = {a.split("=")[0][2:].replace("-", "_") for a in argv if a[:2] == "--"}
    return names | {name[3:] for name in names if name.startswith("no_")}


def apply_smoke(args, values, argv=None):
    """With `--smoke`: the `values` (`{name: value}`) set on `args` for the
    flags the command line `argv` leaves out (`given_flags`)."""
    if not args.smoke:
        return
    given = given_flags(argv)
    for name, value in values.items():
        if name not in given:
            setattr(args, name, value)

"""The command-line helpers every example shares (`examples/common/cli.py`)."""

import argparse

import pytest

from examples.common.cli import add_iterations
from examples.common.cli import add_no_check_hash
from examples.common.cli import add_output_dir
from examples.common.cli import add_seed
from examples.common.cli import add_smoke
from examples.common.cli import add_transformer_size
from examples.common.cli import apply_smoke
from examples.common.cli import check_iterations
from examples.common.cli import check_positive
from examples.common.cli import example_parser
from examples.common.cli import given_flags
from examples.common.cli import status
from examples.common.cli import transformer_size


def test_status_goes_to_standard_error_only(capsys):
    """Status lines stay out of standard output, which holds the results
    (`nmt_transformer.py --translate < src > hyp` must write one line per
    source line)."""
    status("Strategy:", "_DefaultDistributionStrategy with 1 replica(s)")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "Strategy: _DefaultDistributionStrategy with 1 replica(s)\n"


def flags(parser):
    """`{flag: (default, type)}` of `parser`'s options, without `--help`."""
    return {
        action.option_strings[0]: (action.default, action.type)
        for action in parser._actions
        if action.option_strings and action.dest != "help"
    }


def test_no_check_hash_output_dir_seed_and_smoke():
    parser = example_parser("test")
    add_no_check_hash(parser, "accept other text")
    add_output_dir(parser, "outputs/x", "results")
    add_seed(parser)
    add_smoke(parser, "a tiny run")
    assert flags(parser) == {
        "--no-check-hash": (False, None),
        "--output-dir": ("outputs/x", None),
        "--seed": (1337, int),
        "--smoke": (False, None),
    }
    args = parser.parse_args(["--no-check-hash", "--seed", "3", "--smoke"])
    assert (args.no_check_hash, args.output_dir, args.seed, args.smoke) == (
        True, "outputs/x", 3, True,
    )  # fmt: skip
    parser = example_parser("test")
    add_seed(parser, 1, "seed of the weights")
    assert flags(parser) == {"--seed": (1, int)}
    assert parser._actions[-1].help == "seed of the weights"


def test_transformer_size_adds_only_the_flags_given_a_default():
    parser = example_parser("test")
    add_transformer_size(parser, hidden_dim=64, num_heads=4, dropout=0.1,
                         help={"hidden_dim": "d_model"})  # fmt: skip
    assert flags(parser) == {
        "--hidden-dim": (64, int),
        "--num-heads": (4, int),
        "--dropout": (0.1, float),
    }
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["hidden_dim"] == "d_model"
    assert helps["num_heads"] == "attention heads"
    parser = example_parser("test")
    add_transformer_size(parser, num_layers=3, intermediate_dim=512)
    assert flags(parser) == {"--num-layers": (3, int), "--intermediate-dim": (512, int)}
    with pytest.raises(ValueError, match="width"):
        add_transformer_size(parser, width=3)


def test_transformer_size_reads_back_the_flags_it_added():
    parser = example_parser("test")
    add_transformer_size(parser, num_heads=4, num_layers=2, dropout=0.1)
    add_seed(parser)
    args = parser.parse_args(["--num-layers", "3"])
    assert transformer_size(args) == {"num_heads": 4, "num_layers": 3, "dropout": 0.1}


def test_iterations_and_their_checks(capsys):
    parser = example_parser("test")
    add_iterations(parser, 2000, 250)
    assert flags(parser) == {"--iterations": (2000, int), "--eval-interval": (250, int)}
    assert "divides --iterations" in parser._actions[-1].help
    args = parser.parse_args(["--iterations", "100", "--eval-interval", "30"])
    with pytest.raises(SystemExit):
        check_iterations(parser, args)
    assert "--eval-interval must divide --iterations" in capsys.readouterr().err
    args.eval_interval = 0
    with pytest.raises(SystemExit):
        check_positive(parser, args, ["iterations", "eval_interval"])
    assert "--eval-interval must be positive" in capsys.readouterr().err


def test_smoke_sets_only_the_flags_left_out():
    """`--smoke` values for the flags not given, in each spelling."""
    parser = example_parser("test")
    add_smoke(parser, "a tiny run")
    add_iterations(parser, 2000, 250)
    parser.add_argument("--jit-compile", action=argparse.BooleanOptionalAction)
    smoke = dict(iterations=4, eval_interval=2, jit_compile=False)
    for argv, expected in [
        (["--smoke"], (4, 2, False)),
        (["--smoke", "--iterations", "8"], (8, 2, False)),
        (["--smoke", "--eval-interval=4"], (4, 4, False)),
        (["--smoke", "--jit-compile"], (4, 2, True)),
        (["--iterations", "8"], (8, 250, None)),
    ]:
        args = parser.parse_args(argv)
        apply_smoke(args, smoke, argv)
        assert (args.iterations, args.eval_interval, args.jit_compile) == expected
    assert given_flags(["--no-check-hash", "-x", "3"]) == {
        "no_check_hash",
        "check_hash",
    }

"""The command-line helpers every example shares (`examples/common/cli.py`)."""

from examples.common.cli import status


def test_status_goes_to_standard_error_only(capsys):
    """Status lines stay out of standard output, which holds the results
    (`nmt_transformer.py --translate < src > hyp` must write one line per
    source line)."""
    status("Strategy:", "_DefaultDistributionStrategy with 1 replica(s)")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "Strategy: _DefaultDistributionStrategy with 1 replica(s)\n"

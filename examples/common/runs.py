"""What the training examples read back from their own run logs."""

import csv


def last_epoch_rows(log_path):
    """The CSV log's last row of each epoch, in epoch order: a run resumed
    from `BackupAndRestore` logs an epoch again, and the last one counts."""
    with open(log_path) as f:
        rows = {int(r["epoch"]): r for r in csv.DictReader(f)}
    return [rows[epoch] for epoch in sorted(rows)]

"""Synthetic reviews in the JSON-lines format of `../shared/data/imdb`
(`{split}.jsonl.gz`: `id`, `rating`, `label`, `text`), for the IMDB
examples' tests: no network, no shared data."""

import gzip
import json

import numpy as np

GOOD = ["a great film", "wonderful acting", "I loved it", "superb story"]
BAD = ["a dull film", "terrible acting", "I hated it", "boring story"]


def write_reviews(directory, count, phrases=3, suffix="", good=GOOD, bad=BAD):
    """`count` reviews per split in `directory` (created), alternating
    negative and positive (ids 0.. `count - 1`): `phrases` phrases of
    their class joined by ". ", then `suffix`. Returns `directory`."""
    rng = np.random.default_rng(0)
    directory.mkdir()
    for split in ("train", "test"):
        with gzip.open(directory / f"{split}.jsonl.gz", "wt", encoding="utf-8") as f:
            for i in range(count):
                label = i % 2
                text = ". ".join(rng.choice(good if label else bad, size=phrases))
                review = dict(
                    id=i, rating=8 if label else 2, label=label, text=text + suffix
                )
                f.write(json.dumps(review) + "\n")
    return directory

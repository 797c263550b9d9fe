"""The Multi30k data of `gpu_check.py --sections fit`, tokenized, as one npz.

The GPU machine has neither TensorFlow nor keras-hub nor a network, so the
`fit` section of `benchmarks/gpu_check.py` cannot tokenize Multi30k there.
This script runs HERE (TensorFlow, keras-hub, SentencePiece): it reads the
de->en training split from `--data-dir` (`train.de.gz`, `train.en.gz`,
checked against their canonical SHA-256 by `examples/nlp/nmt_common.py`),
trains (or re-uses) one SentencePiece unigram model per language as the
translation example does (`load_or_train_tokenizer`, `--vocabulary-size`
6000), encodes the pairs as the example does (`prepare_pairs`: source =
subwords + EOS, target = BOS + subwords + EOS, pairs longer than
`--max-length` 64 left out) and writes `--output`
(`.gpu/multi30k_de_en.npz`, git-ignored, about 1 MB):

- `source_ids`, `target_ids`: the ragged ids, flat (int16 when the
  vocabulary fits, else int32); `source_lengths`, `target_lengths`: the
  row lengths (int32), so that row `i` is
  `ids[offsets[i]:offsets[i + 1]]` with `offsets = cumsum([0, *lengths])`;
- `source_vocabulary_size`, `target_vocabulary_size`, `pad_id`, `bos_id`,
  `eos_id`, `max_length`;
- `provenance`: a JSON string naming the input files with their SHA-256,
  the SentencePiece models' SHA-256, the counts, the command and the date.

The SentencePiece models are kept beside it (`spm.<lang>.<size>.model`) and
re-used by later runs. Then, with the device tool:
`carry=[".whl", ".gpu"]` takes the bundle along with the working tree.

    make gpu-bundle
    PYTHONPATH=. python benchmarks/gpu_bundle.py --data-dir ../shared/data/multi30k
"""

import argparse
import hashlib
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "nlp"))  # nmt_common

import numpy as np  # noqa: E402


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--data-dir",
        default=os.path.join(ROOT, "..", "shared", "data", "multi30k"),
        help="directory with train.{de,en}[.gz]",
    )
    parser.add_argument("--source", default="de", choices=("de", "en"))
    parser.add_argument("--target", default="en", choices=("de", "en"))
    parser.add_argument("--vocabulary-size", type=int, default=6000)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument(
        "--no-check-hashes",
        action="store_true",
        help="accept input files whose SHA-256 differs from the canonical ones",
    )
    parser.add_argument(
        "--output", default=os.path.join(ROOT, ".gpu", "multi30k_de_en.npz")
    )
    args = parser.parse_args(argv)
    if args.source == args.target:
        parser.error("--source and --target must differ")
    if args.vocabulary_size < 8 or args.max_length < 2:
        parser.error("--vocabulary-size must be >= 8 and --max-length >= 2")
    return args


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    import nmt_common  # TensorFlow and keras-hub: only here, not on the GPU

    check = not args.no_check_hashes
    paths = [
        nmt_common.locate_file("train", lang, args.data_dir, check)
        for lang in (args.source, args.target)
    ]
    sources, targets, dropped_empty = nmt_common.read_parallel(*paths)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    spm_paths = [
        os.path.join(out_dir, f"spm.{lang}.{args.vocabulary_size}.model")
        for lang in (args.source, args.target)
    ]
    tokenizers = [
        nmt_common.load_or_train_tokenizer(path, lines, args.vocabulary_size)
        for path, lines in zip(spm_paths, (sources, targets), strict=True)
    ]
    source_ids, target_ids, dropped_long = nmt_common.prepare_pairs(
        tokenizers, sources, targets, args.max_length
    )
    vocab = [t.vocabulary_size() for t in tokenizers]
    id_dtype = "int16" if max(vocab) <= np.iinfo("int16").max + 1 else "int32"
    arrays = dict(
        source_ids=source_ids.flat_values.numpy().astype(id_dtype),
        source_lengths=source_ids.row_lengths().numpy().astype("int32"),
        target_ids=target_ids.flat_values.numpy().astype(id_dtype),
        target_lengths=target_ids.row_lengths().numpy().astype("int32"),
    )
    pairs = len(arrays["source_lengths"])
    provenance = dict(
        dataset=f"Multi30k task 1, train split, {args.source}->{args.target}",
        files={os.path.basename(p): sha256(p) for p in paths},
        sentencepiece={os.path.basename(p): sha256(p) for p in spm_paths},
        tokenization=(
            "examples/nlp/nmt_common.py: SentencePiece unigram per language "
            f"(vocabulary {args.vocabulary_size}); source = subwords + EOS, "
            "target = BOS + subwords + EOS; pairs longer than max_length dropped"
        ),
        pairs=pairs,
        dropped_empty=dropped_empty,
        dropped_long=dropped_long,
        source_tokens=int(arrays["source_lengths"].sum()),
        target_tokens=int(arrays["target_lengths"].sum()),
        command=" ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )
    tmp = args.output + ".tmp.npz"
    np.savez_compressed(
        tmp,
        **arrays,
        source_vocabulary_size=np.int32(vocab[0]),
        target_vocabulary_size=np.int32(vocab[1]),
        pad_id=np.int32(nmt_common.PAD_ID),
        bos_id=np.int32(nmt_common.BOS_ID),
        eos_id=np.int32(nmt_common.EOS_ID),
        max_length=np.int32(args.max_length),
        provenance=np.array(json.dumps(provenance)),
    )
    os.replace(tmp, args.output)
    print(
        f"Wrote {args.output}: {pairs} pairs ({dropped_empty} empty, "
        f"{dropped_long} longer than {args.max_length} left out), vocabularies "
        f"{vocab}, {provenance['target_tokens']} target tokens, "
        f"{os.path.getsize(args.output) / 2**20:.2f} MiB, "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()

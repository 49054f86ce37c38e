#!/usr/bin/python3
"""Megatron's published .bin/.idx layout (megatron/core/datasets/indexed_dataset.py, _IndexWriter and
_IndexReader, version 1), written and read here with struct and numpy alone, against dtrain's own reader
and writer:
  megatron_format.py read MEGATRON_DUMP    datasets written here (uint8, uint16, int32; several sequences
                                           per document; sequences stored out of order in .bin, an empty
                                           one) read back by dtrain token for token, document by document
  megatron_format.py write DTRAIN_DATA     dtrain-data --format megatron output parsed here: the layout,
                                           one document per paragraph, the documents together = the text
  megatron_format.py encoded PREFIX MODEL TEXT...
                                           a dataset dtrain-data wrote from the TEXT files with the
                                           SentencePiece MODEL: one document per paragraph (cut here), each
                                           the ids of Debian's python3-sentencepiece encoding that paragraph,
                                           decoding back to it
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_dataset(prefix, documents, dtype, reverse_bin=False):
    """documents: a list of documents, each a list of sequences (lists of token ids)."""
    code = next(c for c, t in CODES.items() if t == dtype)
    sequences = [np.asarray(s, dtype=dtype) for doc in documents for s in doc]
    order = list(range(len(sequences)))[::-1] if reverse_bin else list(range(len(sequences)))
    pointers, blob = [0] * len(sequences), b""
    for i in order:  # the .bin holds the sequences in `order`; the pointers say where each one is
        pointers[i] = len(blob)
        blob += sequences[i].tobytes()
    doc_idx = [0]
    for doc in documents:
        doc_idx.append(doc_idx[-1] + len(doc))
    with open(prefix + ".bin", "wb") as f:
        f.write(blob)
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sequences)) + struct.pack("<Q", len(doc_idx)))
        f.write(np.array([len(s) for s in sequences], dtype=np.int32).tobytes())
        f.write(np.array(pointers, dtype=np.int64).tobytes())
        f.write(np.array(doc_idx, dtype=np.int64).tobytes())


def read_dataset(prefix):
    """Returns (dtype code, sequence lengths, pointers, document indices, documents as token arrays)."""
    idx = open(prefix + ".idx", "rb").read()
    if idx[:9] != MAGIC:
        fail("bad magic %r" % idx[:9])
    (version,) = struct.unpack("<Q", idx[9:17])
    code = idx[17]
    seqs, docs = struct.unpack("<QQ", idx[18:34])
    if version != 1:
        fail("version %d" % version)
    lengths = np.frombuffer(idx, np.int32, seqs, 34)
    pointers = np.frombuffer(idx, np.int64, seqs, 34 + 4 * seqs)
    doc_idx = np.frombuffer(idx, np.int64, docs, 34 + 12 * seqs)
    if len(idx) != 34 + 12 * seqs + 8 * docs:
        fail("index is %d bytes, want %d" % (len(idx), 34 + 12 * seqs + 8 * docs))
    binary = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")
    dtype = CODES[code]
    item = np.dtype(dtype).itemsize

    def sequence(i):
        return np.frombuffer(binary, dtype, lengths[i], pointers[i])

    documents = [np.concatenate([sequence(s) for s in range(doc_idx[d], doc_idx[d + 1])] or [np.zeros(0, dtype)])
                 for d in range(docs - 1)]
    if pointers.size and (pointers[-1] + lengths[-1] * item != len(binary)):
        fail(".bin is %d bytes, the last sequence ends at %d" % (len(binary), pointers[-1] + lengths[-1] * item))
    return code, lengths, pointers, doc_idx, documents


def check_read(dump, work):
    rng = np.random.default_rng(7)
    cases = [
        ("u16", np.uint16, 65535, False),
        ("i32", np.int32, 2**31 - 1, True),
        ("u8", np.uint8, 255, False),
    ]
    for name, dtype, top, reverse in cases:
        documents = []
        for d in range(40):
            n_seq = int(rng.integers(1, 4))
            documents.append([list(rng.integers(0, top, int(rng.integers(0, 50)), endpoint=True)) for _ in range(n_seq)])
        documents[3] = [[], [top, 0, 1]]  # an empty sequence, and the largest id
        prefix = os.path.join(work, name)
        write_dataset(prefix, documents, dtype, reverse_bin=reverse)
        out = subprocess.run([dump, prefix], capture_output=True, text=True)
        if out.returncode != 0:
            fail("%s: megatron_dump exited %d: %s" % (name, out.returncode, out.stderr))
        got = [list(map(int, line.split())) for line in out.stdout.split("\n")[:-1]]
        want = [[int(t) for s in doc for t in s] for doc in documents]
        if got != want:
            bad = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) if len(got) == len(want) else -1
            fail("%s: dtrain read other tokens (%d documents vs %d; first differing document %d)" % (name, len(got), len(want), bad))
        print("  %s: %d documents, %d tokens read back token for token%s" %
              (name, len(want), sum(map(len, want)), " (sequences stored in reverse order)" if reverse else ""))


def check_write(tool, work):
    texts = [
        "Call me Ishmael.\nSome years ago.\n\n\nNever mind how long.\n  \nprecisely\n",
        "\nA second file: one paragraph with no blank line.",
        "Third \xe9t\xe9 file.\r\n\r\nCRLF paragraphs.\r\n",
    ]
    paths = []
    for i, t in enumerate(texts):
        paths.append(os.path.join(work, "in%d.txt" % i))
        with open(paths[-1], "w", encoding="utf-8") as f:
            f.write(t)
    prefix = os.path.join(work, "out", "corpus")
    out = subprocess.run([tool, "--format", "megatron", "--out", prefix] + paths, capture_output=True, text=True)
    if out.returncode != 0:
        fail("dtrain-data exited %d: %s" % (out.returncode, out.stderr))
    code, lengths, pointers, doc_idx, documents = read_dataset(prefix)
    if code != 8:
        fail("dtype code %d, want 8 (uint16, Megatron's choice below a vocabulary of 65500)" % code)
    if list(doc_idx) != list(range(len(lengths) + 1)):
        fail("document indices %s, want one sequence per document" % list(doc_idx))
    if list(pointers) != list(np.concatenate([[0], np.cumsum(lengths[:-1]) * 2])):
        fail("pointers %s are not the packed sequences" % list(pointers))
    raw = [open(p, "rb").read() for p in paths]
    want_docs = [b"Call me Ishmael.\nSome years ago.\n\n\n", b"Never mind how long.\n  \n", b"precisely\n",
                 raw[1], b"Third \xc3\xa9t\xc3\xa9 file.\r\n\r\n", b"CRLF paragraphs.\r\n"]
    got_docs = [bytes(d.astype(np.uint8)) for d in documents]
    if got_docs != want_docs:
        fail("documents %r, want %r" % (got_docs, want_docs))
    if b"".join(got_docs) != b"".join(raw):
        fail("the documents together are not the input text")
    print("  dtrain-data: %d documents, %d tokens, uint16, read back by the published layout" % (len(documents), sum(lengths)))


def paragraphs(text):
    """The paragraphs of `text` (bytes): a new one starts at a non-blank line after a blank line that follows
    text (blank: spaces, tabs and \r only), so leading blank lines stay with the first."""
    docs, current, previous_blank, seen_text = [], b"", False, False
    for line in re.findall(rb"[^\n]*\n|[^\n]+$", text):
        blank = not line.strip(b" \t\r\n")
        if not blank and previous_blank and seen_text:
            docs.append(current)
            current = b""
        current += line
        previous_blank, seen_text = blank, seen_text or not blank
    return docs + [current] if current else docs


def check_encoded(prefix, model, texts):
    try:
        import sentencepiece
    except ImportError:
        fail("no Python module sentencepiece; install Debian's python3-sentencepiece (tools/install-deps does)")
    sp = sentencepiece.SentencePieceProcessor(model_file=model)
    code, lengths, pointers, doc_idx, documents = read_dataset(prefix)
    want_code = 8 if sp.get_piece_size() < 65500 else 4
    if code != want_code:
        fail("dtype code %d, want %d for a vocabulary of %d" % (code, want_code, sp.get_piece_size()))
    if list(doc_idx) != list(range(len(lengths) + 1)):
        fail("document indices are not one sequence per document")
    want_text = [p for path in texts for p in paragraphs(open(path, "rb").read())]
    if len(documents) != len(want_text):
        fail("%d documents, want %d paragraphs" % (len(documents), len(want_text)))
    tokens = 0
    for i, (doc, text) in enumerate(zip(documents, want_text)):
        want = sp.encode(text.decode("utf-8"))
        got = [int(t) for t in doc]
        if got != want:
            at = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            fail("document %d holds other ids than SentencePiece's encoding of its paragraph (%d vs %d ids, first "
                 "difference at %d: %s vs %s; paragraph %r)" % (i, len(got), len(want), at, got[at:at + 5], want[at:at + 5],
                                                               text[:60]))
        if sp.decode(got).encode("utf-8") != text:
            fail("document %d does not decode to its paragraph %r" % (i, text[:60]))
        tokens += len(got)
    print("  %d documents, %d tokens (%.2f bytes per token): each paragraph's SentencePiece ids, decoding back to it" %
          (len(documents), tokens, sum(map(len, want_text)) / tokens))


if __name__ == "__main__":
    if sys.argv[1] == "encoded":
        check_encoded(sys.argv[2], sys.argv[3], sys.argv[4:])
        print("PASS")
        sys.exit(0)
    mode, program = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as scratch:
        {"read": check_read, "write": check_write}[mode](program, scratch)
    print("PASS")

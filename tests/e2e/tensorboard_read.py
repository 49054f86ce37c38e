#!/usr/bin/python3
"""dtrain's TensorBoard event file, read without dtrain's code, against its metrics file.

  tensorboard_read.py EVENTS_FILE METRICS.jsonl

Reads the TFRecord framing by its public description (uint64 length, masked CRC32C of the length,
the bytes, masked CRC32C of the bytes; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8), the CRCs
checked with crcmod's CRC-32C; decodes each Event with Google's protobuf runtime and
tensorboard_event.proto (compiled here by protoc). The first Event must be file_version
"brain.Event:2"; then one Event per metrics line, at its step, with one scalar per value of the line
that is not null, each the float32 of the line's number, bit for bit."""
import json
import os
import struct
import subprocess
import sys
import tempfile

import crcmod.predefined
import numpy as np

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    raw = open(path, "rb").read()
    at = 0
    while at < len(raw):
        head = raw[at:at + 12]
        assert len(head) == 12, "a truncated record header at byte %d" % at
        n, = struct.unpack("<Q", head[:8])
        assert struct.unpack("<I", head[8:])[0] == masked(head[:8]), "the length's CRC at byte %d" % at
        data = raw[at + 12:at + 12 + n]
        assert len(data) == n, "a truncated record at byte %d" % at
        assert struct.unpack("<I", raw[at + 12 + n:at + 16 + n])[0] == masked(data), "the data's CRC at byte %d" % at
        yield data
        at += 16 + n


def main():
    events_path, metrics_path = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as gen:
        subprocess.run(["protoc", "-I", here, "--python_out", gen, "tensorboard_event.proto"], check=True)
        sys.path.insert(0, gen)
        import tensorboard_event_pb2 as pb

        events = []
        for data in records(events_path):
            e = pb.Event()
            e.ParseFromString(data)
            events.append(e)
    assert events and events[0].file_version == "brain.Event:2", "no file_version event first"
    lines = [json.loads(l) for l in open(metrics_path)]
    steps = events[1:]
    assert len(steps) == len(lines), "%d step events for %d metrics lines" % (len(steps), len(lines))
    values = 0
    for e, line in zip(steps, lines):
        assert e.step == line["step"], "event step %d, metrics step %d" % (e.step, line["step"])
        assert e.wall_time > 1.5e9, "wall_time %r" % e.wall_time
        want = {k: v for k, v in line.items() if k != "step" and v is not None}
        got = {v.tag: v.simple_value for v in e.summary.value}
        assert set(got) == set(want), "step %d: tags %s, metrics %s" % (e.step, sorted(got), sorted(want))
        for k, v in want.items():
            assert np.float32(got[k]) == np.float32(v), "step %d %s: %r, metrics %r" % (e.step, k, got[k], v)
            values += 1
    print("OK: %d events, %d scalars equal to the metrics file's as float32" % (len(steps), values))


if __name__ == "__main__":
    main()

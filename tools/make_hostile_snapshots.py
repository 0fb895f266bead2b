#!/usr/bin/python3
"""Writes tests/snapshots/hostile/: snapshots that `modelprof memory` must refuse with exit
status 2 and a message, never crashing and never running what they name; their README.md
(what each must do); and copies of them and of a few valid snapshots as the seed corpus of
the memory fuzz target (tests/fuzz/memory/).

  tools/make_hostile_snapshots.py [--out tests/snapshots/hostile] [--seeds tests/fuzz/memory]

Each case is built from raw pickle opcodes (Python's pickletools names) so the offending
opcode's byte offset is known and written in the README. Commands named by the hostile
pickles only touch /tmp/modelprof-hostile-ran: a test can check that file never appears.
"""
import argparse
import gzip
import os
import pickle
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import snapshot_ref  # noqa: E402

CMD = b"touch /tmp/modelprof-hostile-ran"
P2 = b"\x80\x02"


def u(s):  # BINUNICODE
    b = s.encode() if isinstance(s, str) else s
    return b"X" + struct.pack("<I", len(b)) + b


def su(s):  # SHORT_BINUNICODE (protocol 4)
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def snap_prefix():
    """A protocol-2 snapshot dict opened up to the first event's 'frames' value:
    {'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 512,
    'stream': 0, 'frames': <here>"""
    return (P2 + b"}(" + u("segments") + b"]" + u("device_traces") + b"]]"
            + b"}(" + u("action") + u("alloc") + u("addr") + b"M\x00\x10" + u("size")
            + b"M\x00\x02" + u("stream") + b"K\x00" + u("frames"))


def snap_suffix():
    return b"u" + b"a" + b"a" + b"u."  # SETITEMS event, APPENDS trace, APPENDS traces, SETITEMS


def event_snapshot(**fields):
    """A protocol-4 pickle of a valid-looking snapshot with one event's fields given."""
    ev = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0}
    ev.update(fields)
    seg = {"device": 0, "address": 4096, "total_size": 2097152, "allocated_size": 512,
           "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "small",
           "blocks": [{"address": 4096, "size": 512, "requested_size": 512,
                       "state": "active_allocated", "frames": []},
                      {"address": 4608, "size": 2097152 - 512, "requested_size": 0,
                       "state": "inactive", "frames": []}]}
    return pickle.dumps({"segments": [seg], "device_traces": [[ev]]}, protocol=4)


def segment_snapshot(**fields):
    seg = {"device": 0, "address": 4096, "total_size": 2097152, "stream": 0,
           "segment_type": "small", "blocks": [{"address": 4096, "size": 2097152,
                                                "requested_size": 0, "state": "inactive"}]}
    seg.update(fields)
    return pickle.dumps({"segments": [seg], "device_traces": [[]]}, protocol=4)


def cases(valid):
    """name -> (bytes, what it must do)."""
    c = {}
    # ---- opcodes that name or call something ----
    b = P2 + b"cos\nsystem\n" + u(CMD) + b"\x85R."
    c["global_reduce.pickle"] = (b, "refuse GLOBAL (os system) at byte 2; never run it")
    b = b"\x80\x04" + su("os") + b"\x94" + su("system") + b"\x94\x93" + u(CMD) + b"\x85R."
    c["stack_global_reduce.pickle"] = (b, "refuse STACK_GLOBAL at byte %d" % b.index(b"\x93"))
    b = b"(S'" + CMD + b"'\nios\nsystem\n."
    c["inst.pickle"] = (b, "refuse INST at byte %d" % b.index(b"ios"))
    b = b"(cos\nsystem\nS'" + CMD + b"'\no."
    c["obj.pickle"] = (b, "refuse GLOBAL at byte 1 (or OBJ at byte %d)" % (len(b) - 2))
    b = P2 + b"cbuiltins\nobject\n)\x81."
    c["newobj.pickle"] = (b, "refuse GLOBAL at byte 2 (or NEWOBJ at byte %d)" % (len(b) - 2))
    b = b"\x80\x04" + su("builtins") + su("object") + b"\x93)}\x92."
    c["newobj_ex.pickle"] = (b, "refuse STACK_GLOBAL at byte %d (or NEWOBJ_EX)" % b.index(b"\x93"))
    b = P2 + b"}" + b"}" + u("a") + b"K\x01sb."
    c["build.pickle"] = (b, "refuse BUILD at byte %d" % (len(b) - 2))
    b = b"Pos.system\n."
    c["persid.pickle"] = (b, "refuse PERSID at byte 0")
    b = P2 + u("os.system") + b"Q."
    c["binpersid.pickle"] = (b, "refuse BINPERSID at byte %d" % (len(b) - 2))
    b = P2 + b"\x82\x01."
    c["ext1.pickle"] = (b, "refuse EXT1 at byte 2")
    b = b"\x80\x05\x97."
    c["next_buffer.pickle"] = (b, "refuse NEXT_BUFFER at byte 2 (out-of-band data)")
    pre = snap_prefix()
    b = pre + b"cos\nsystem\n" + u(CMD) + b"\x85R" + snap_suffix()
    c["reduce_in_frames.pickle"] = (b, "refuse GLOBAL at byte %d, inside an event's frames" % len(pre))
    # ---- not a pickle / broken streams ----
    c["empty.pickle"] = (b"", "empty file")
    c["json.pickle"] = (b'{"segments": [], "device_traces": []}\n', "not a pickle (bad opcode '{' at byte 0)")
    c["bad_opcode.pickle"] = (P2 + b"\xff.", "unknown opcode 0xff at byte 2")
    c["protocol6.pickle"] = (b"\x80\x06}.", "unsupported protocol 6 at byte 0")
    c["no_stop.pickle"] = (P2 + b"}", "ends without STOP (truncated)")
    c["truncated_half.pickle"] = (valid[:len(valid) // 2], "truncated at byte %d" % (len(valid) // 2))
    cut = valid.index(b"segments") - 2
    c["truncated_in_string.pickle"] = (valid[:cut], "truncated inside a string's length/bytes")
    c["truncated_before_stop.pickle"] = (valid[:-1], "truncated: the last opcode (STOP) missing")
    c["stack_underflow.pickle"] = (P2 + b"a.", "APPEND at byte 2 with an empty stack")
    c["setitems_odd.pickle"] = (P2 + b"}(K\x01u.", "SETITEMS at byte 6 with an odd number of items")
    c["mark_missing.pickle"] = (P2 + b"]K\x01e.", "APPENDS at byte 5 without a MARK")
    c["stop_with_two.pickle"] = (P2 + b"}}.", "STOP with two objects on the stack")
    # ---- memo ----
    c["memo_out_of_range.pickle"] = (P2 + b"h\x05.", "BINGET 5 at byte 2: memo index out of range")
    c["memo_long_out_of_range.pickle"] = (P2 + b"}q\x00j\xff\xff\xff\xff.", "LONG_BINGET 4294967295 at byte 5: out of range")
    c["memo_put_huge_index.pickle"] = (P2 + b"}r\xff\xff\xff\x7f.", "LONG_BINPUT 2147483647 at byte 3: a memo index no pickler writes (refused, no 2^31-entry memo)")
    c["memo_get_huge_index.pickle"] = (P2 + b"}q\x00j\xfe\xff\xff\x7f.", "LONG_BINGET 2147483646 at byte 5: out of range")
    c["memo_get_before_put.pickle"] = (b"\x80\x04\x94h\x00.", "MEMOIZE at byte 2 with an empty stack")
    b = P2 + b"}q\x00(" + u("segments") + b"]q\x01h\x01a" + u("device_traces") + b"h\x01u."
    c["memo_self.pickle"] = (b, "a list that contains itself (BINGET 1 inside list 1): refused, no loop")
    b = P2 + b"}q\x00" + u("segments") + b"h\x00s."
    c["memo_self_dict.pickle"] = (b, "a dict whose 'segments' is itself (BINGET 0 at byte %d): refused" % b.index(b"h\x00"))
    pre = snap_prefix()
    b = pre + b"]q\x07h\x07a" + snap_suffix()
    c["frames_self.pickle"] = (b, "an event's frames list that contains itself (BINGET 7 at byte %d): refused" % (len(pre) + 3))
    # ---- deep nesting, huge lengths ----
    c["deep_marks.pickle"] = (P2 + b"(" * 100000 + b".", "100,000 MARKs: too deep, refused")
    c["deep_lists.pickle"] = (P2 + b"]" * 100000 + b"a" * 99999 + b".", "lists nested 100,000 deep: too deep, refused")
    c["deep_dicts.pickle"] = (P2 + u("segments") + b"q\x00" + b"}h\x00" * 30000 + b"K\x01" + b"s" * 30000 + b"\x85.",
                              "dicts nested 30,000 deep (the key shared through the memo): too deep, refused")
    c["huge_binunicode.pickle"] = (P2 + b"X\xff\xff\xff\xffabc.", "BINUNICODE at byte 2 declares 4294967295 bytes, 4 left")
    c["huge_binunicode8.pickle"] = (b"\x80\x04\x8d" + struct.pack("<Q", (1 << 63) - 1) + b"abc.",
                                    "BINUNICODE8 at byte 2 declares 2^63-1 bytes")
    c["huge_binbytes8.pickle"] = (b"\x80\x04\x8e" + struct.pack("<Q", 1 << 62) + b"abc.",
                                  "BINBYTES8 at byte 2 declares 2^62 bytes")
    c["huge_long4.pickle"] = (P2 + b"\x8b\xff\xff\xff\x7f\x01\x02.", "LONG4 at byte 2 declares 2 GiB of digits")
    c["huge_frame.pickle"] = (b"\x80\x04\x95" + struct.pack("<Q", 1 << 60) + b"}.", "FRAME at byte 2 declares 2^60 bytes")
    c["negative_binint_length.pickle"] = (P2 + b"\x8b\x00\x00\x00\x80.", "LONG4 at byte 2 with a negative length")
    # ---- well-formed pickles, wrong content ----
    c["top_int.pickle"] = (pickle.dumps(42, protocol=2), "not a snapshot: an int at the top")
    c["top_string.pickle"] = (pickle.dumps("segments", protocol=4), "not a snapshot: a string at the top")
    c["dict_without_keys.pickle"] = (pickle.dumps({"a": 1}, protocol=4), "not a snapshot: no segments/device_traces")
    c["size_string.pickle"] = (event_snapshot(size="512"), "device 0 event 0: size is a string")
    c["size_float.pickle"] = (event_snapshot(size=512.0), "device 0 event 0: size is a float")
    c["size_none.pickle"] = (event_snapshot(size=None), "device 0 event 0: size is None")
    c["size_bool.pickle"] = (event_snapshot(size=True), "device 0 event 0: size is a bool")
    c["addr_bytes.pickle"] = (event_snapshot(addr=b"\x00\x10"), "device 0 event 0: addr is bytes")
    c["action_int.pickle"] = (event_snapshot(action=3), "device 0 event 0: action is not a string")
    c["event_no_addr.pickle"] = (pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "size": 8}]]}, protocol=4),
                                 "device 0 event 0 (alloc): no addr")
    c["event_not_dict.pickle"] = (pickle.dumps({"segments": [], "device_traces": [[[1, 2]]]}, protocol=4),
                                  "device 0 event 0: a list, not a dict")
    c["traces_not_list.pickle"] = (pickle.dumps({"segments": [], "device_traces": 7}, protocol=4), "device_traces is an int")
    c["size_negative.pickle"] = (event_snapshot(size=-512), "device 0 event 0: negative size")
    c["size_overflow.pickle"] = (event_snapshot(size=1 << 64), "device 0 event 0: size does not fit in 64 bits")
    c["size_huge_long.pickle"] = (event_snapshot(size=1 << 800), "device 0 event 0: a 100-byte integer as size")
    c["addr_negative.pickle"] = (event_snapshot(addr=-4096), "device 0 event 0: negative addr")
    c["segment_negative_total.pickle"] = (segment_snapshot(total_size=-2097152), "segments[0].total_size negative")
    c["segment_no_blocks.pickle"] = (pickle.dumps({"segments": [{"device": 0, "address": 0, "total_size": 512}]}, protocol=4),
                                     "segments[0]: no blocks")
    c["segment_device_string.pickle"] = (segment_snapshot(device="cuda:0"), "segments[0].device is a string")
    c["block_size_overflow.pickle"] = (segment_snapshot(blocks=[{"address": 4096, "size": 1 << 70, "state": "active_allocated"}]),
                                       "segments[0].blocks[0].size overflows")
    # two allocations of 2^62 bytes each: each below 2^63, together past it
    big = 1 << 62
    c["sizes_sum_overflow.pickle"] = (pickle.dumps({"segments": [], "device_traces": [[
        {"action": "segment_alloc", "addr": 1 << 20, "size": big, "stream": 0},
        {"action": "alloc", "addr": 1 << 20, "size": big, "stream": 0},
        {"action": "segment_alloc", "addr": (1 << 20) + big, "size": big, "stream": 0},
        {"action": "alloc", "addr": (1 << 20) + big, "size": big, "stream": 0}]]}, protocol=4),
        "the bytes live together pass 2^63 - 1")
    # ---- gzip ----
    c["bad_gzip.pickle.gz"] = (b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"this is not deflate data", "bad gzip stream")
    gz = gzip.compress(valid, mtime=0)
    c["truncated_gzip.pickle.gz"] = (gz[:len(gz) // 2], "gzip stream truncated")
    c["gzip_of_global.pickle.gz"] = (gzip.compress(P2 + b"cos\nsystem\n" + u(CMD) + b"\x85R.", mtime=0),
                                     "refuse GLOBAL at byte 2 (of the decompressed stream)")
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "snapshots", "hostile"))
    ap.add_argument("--seeds", default=os.path.join(ROOT, "tests", "fuzz", "memory"))
    args = ap.parse_args()
    valid_path = os.path.join(ROOT, "tests", "snapshots", "v22_no_frames.pickle")
    with open(valid_path, "rb") as f:
        valid = f.read()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    bad = 0
    for name, (data, what) in cases(valid).items():
        p = os.path.join(args.out, name)
        with open(p, "wb") as f:
            f.write(data)
        try:
            snapshot_ref.reference(p, warn=lambda m: None)
            got = "ACCEPTED"
            bad += 1
        except snapshot_ref.BadSnapshot as e:
            got = str(e).replace(args.out + "/", "")
        rows.append((name, len(data), what, got))
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write("# Hostile snapshots\n\nWritten by `tools/make_hostile_snapshots.py`. Every file here must make "
                "`modelprof memory FILE` exit with status 2 and a message naming the opcode and its byte "
                "offset, or the event/segment and field, with no crash, no hang and no more memory than the "
                "file's size calls for. Nothing named in a file is ever run: the commands only touch "
                "`/tmp/modelprof-hostile-ran`, which must never appear.\n\n"
                "| file | bytes | must do | tools/snapshot_ref.py says |\n|---|---|---|---|\n")
        for name, n, what, got in rows:
            f.write("| `%s` | %d | exit 2: %s | %s |\n" % (name, n, what, got.replace("|", "\\|")[:160]))
    # the fuzz seed corpus
    os.makedirs(args.seeds, exist_ok=True)
    for name, n, _, _ in rows:
        if n > 65536:  # the deep ones: too long for a fuzz seed (libFuzzer's -max_len)
            continue
        shutil.copyfile(os.path.join(args.out, name), os.path.join(args.seeds, "hostile-" + name))
    snaps = os.path.join(ROOT, "tests", "snapshots")
    for name in ("v113_bare_list.pickle", "v20_one_entry.pickle", "v22_train_adam.pickle",
                 "v25_multidev_oom.pickle", "v25_expandable.pickle", "v25_leak_churn.pickle.gz",
                 "v22_ring_truncated.pickle", "v29_newest_extras.pickle",
                 "HugePandaCoder_octree-nca-groupeq__mem_snapshots_cuda_single_step__55ff68f.pickle"):
        shutil.copyfile(os.path.join(snaps, name), os.path.join(args.seeds, name))
    for name, n, what, got in rows:
        print("%-34s %7d  %s" % (name, n, got[:90]))
    if bad:
        print("%d hostile files were ACCEPTED by snapshot_ref.py" % bad)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

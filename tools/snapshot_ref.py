#!/usr/bin/python3
"""The reference replay of a CUDA memory snapshot (issue 32), in plain Python.

  tools/snapshot_ref.py FILE[.pickle|.pickle.gz]            print the reference JSON
  tools/snapshot_ref.py FILE --check MODELPROF_JSON         compare `modelprof memory
                                                            FILE --format json` with it

The file is read with a restricted Unpickler: find_class and persistent_load refuse
everything, so a pickle that names a function is never run (exit 2, message).

What it prints (the contract in docs/MEMORY.md, "Snapshot layout"):
  {"devices": [{"device", "events": {action: count}, "peak_requested_bytes",
    "peak_event", "peak_reserved_bytes", "end_requested_bytes",
    "end_allocated_bytes", "end_reserved_bytes", "top10_at_peak": [..]}]}

Replay, per device, in requested bytes (the unit of the trace's alloc/free sizes):
  start = final active blocks (active_allocated, active_pending_free) whose address
          is not live at the end of the trace (counted by requested_size, else the block's
          history[0].real_size, else size)
        + frees of addresses the trace never allocated before them (by the free's size);
  then `alloc` adds its size, `free_completed` subtracts the size of the alloc it ends
  (`free_requested` only marks). peak_event: index of the event after which the peak
  first holds; -1 when the peak is the start, or when there is no event list (then the
  end state is the peak).
  Reserved: start = sum of final segments' total_size - the trace's net of
  segment_alloc/segment_map (+) and segment_free/segment_unmap (-).
Warnings (stderr, the replay goes on): a double free (ignored), a free whose size
differs from its alloc's (the alloc's size is used), an alloc at a live address
(the earlier one is taken as freed), the replay's end against the final blocks.
Exit status: 0 ok, 2 bad input (message on stderr), 1 --check found a difference.
"""
import collections
import gzip
import io
import json
import os
import pickle
import sys
import zlib

ACTIVE_STATES = ("active_allocated", "active_pending_free")


class BadSnapshot(Exception):
    pass


class _Refuse(pickle.Unpickler):
    """Builds plain data only: every opcode that names a global or a persistent id
    reaches one of these two methods and is refused."""

    def find_class(self, module, name):
        raise BadSnapshot("pickle names %s.%s (GLOBAL/STACK_GLOBAL/INST): refused, "
                          "a snapshot holds plain data only" % (module, name))

    def persistent_load(self, pid):
        raise BadSnapshot("pickle holds a persistent id (PERSID/BINPERSID): refused")


def load(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise BadSnapshot("%s: cannot read: %s" % (path, e.strerror))
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise BadSnapshot("%s: bad gzip stream: %s" % (path, e))
    if not raw:
        raise BadSnapshot("%s: empty file" % path)
    # bound the address space while unpickling: a hostile LONG_BINPUT index (2^31) makes
    # Python's unpickler grow its memo array to match, tens of GB; a snapshot never needs
    # more than a small multiple of its size
    lim = None
    try:
        import resource
        lim = resource.getrlimit(resource.RLIMIT_AS)
        want = _vm_bytes() + max(2 << 30, 40 * len(raw))
        if lim[0] == resource.RLIM_INFINITY or lim[0] > want:
            resource.setrlimit(resource.RLIMIT_AS, (want, lim[1]))
    except (ImportError, ValueError, OSError):
        lim = None
    try:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
        return _Refuse(io.BytesIO(raw)).load()
    except BadSnapshot as e:
        raise BadSnapshot("%s: %s" % (path, e))
    except RecursionError:
        raise BadSnapshot("%s: pickle nested too deeply" % path)
    except MemoryError:
        raise BadSnapshot("%s: pickle declares more than memory holds" % path)
    except Exception as e:  # UnpicklingError, EOFError, ValueError, ...
        raise BadSnapshot("%s: not a readable pickle: %s: %s" % (path, type(e).__name__, e))
    finally:
        if lim is not None:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, lim)


def _vm_bytes():
    """This process's virtual size now (Linux), 0 where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _int(v, what):
    if type(v) is not int:
        raise BadSnapshot("%s: expected an integer, found %s" % (what, type(v).__name__))
    return v


def _size(v, what):
    v = _int(v, what)
    if v < 0:
        raise BadSnapshot("%s: negative value %d" % (what, v))
    if v >= 1 << 63:
        raise BadSnapshot("%s: %d does not fit in 64 bits" % (what, v))
    return v


def _dict(v, what):
    if not isinstance(v, dict):
        raise BadSnapshot("%s: expected a dict, found %s" % (what, type(v).__name__))
    return v


def _list(v, what):
    if not isinstance(v, (list, tuple)):
        raise BadSnapshot("%s: expected a list, found %s" % (what, type(v).__name__))
    return v


def _frames(v, what):
    """A frame list: a list of dicts (a list that holds itself, through the memo, is not)."""
    if not isinstance(v, (list, tuple)):
        raise BadSnapshot("%s: expected a list of frames, found %s" % (what, type(v).__name__))
    for i, f in enumerate(v):
        if not isinstance(f, dict):
            raise BadSnapshot("%s[%d]: expected a frame (a dict), found %s" % (what, i, type(f).__name__))


def block_requested(b, what):
    """requested_size, else history[0].real_size (PyTorch 1.13/2.0), else size."""
    if "requested_size" in b:
        return _size(b["requested_size"], what + ".requested_size")
    h = b.get("history")
    if isinstance(h, (list, tuple)) and h and isinstance(h[0], dict) and "real_size" in h[0]:
        return _size(h[0]["real_size"], what + ".history[0].real_size")
    return _size(b["size"], what + ".size")


def normalise(data):
    """(segments, device_traces or None) from the dict or the bare segment list."""
    if isinstance(data, dict):
        if "segments" not in data and "device_traces" not in data:
            raise BadSnapshot("not a memory snapshot: a dict without 'segments' or "
                              "'device_traces'")
        segs = _list(data.get("segments", []), "segments")
        traces = data.get("device_traces")
        if traces is not None:
            traces = _list(traces, "device_traces")
        return segs, traces
    if isinstance(data, list):
        return _list(data, "segments"), None
    raise BadSnapshot("not a memory snapshot: the pickle holds a %s, not a dict or a "
                      "list of segments" % type(data).__name__)


def replay(data, warn):
    segs, traces = normalise(data)
    n_events = sum(len(_list(t, "device_traces[%d]" % i)) for i, t in enumerate(traces or []))
    if not segs and n_events == 0:
        raise BadSnapshot("the snapshot recorded nothing (no segments, no events): memory "
                          "history was probably not enabled before the allocations "
                          "(call torch.cuda.memory._record_memory_history(max_entries=...) "
                          "first)")
    # final state per device
    final = collections.defaultdict(lambda: {"reserved": 0, "blocks": []})
    for si, s in enumerate(segs):
        w = "segments[%d]" % si
        s = _dict(s, w)
        for k in ("device", "address", "total_size", "blocks"):
            if k not in s:
                raise BadSnapshot("%s: no '%s'" % (w, k))
        dev = _int(s["device"], w + ".device")
        if dev < 0:
            raise BadSnapshot("%s.device: negative device %d" % (w, dev))
        addr = _size(s["address"], w + ".address")
        total = _size(s["total_size"], w + ".total_size")
        final[dev]["reserved"] += total
        for bi, b in enumerate(_list(s["blocks"], w + ".blocks")):
            bw = "%s.blocks[%d]" % (w, bi)
            b = _dict(b, bw)
            if "size" not in b or "state" not in b:
                raise BadSnapshot("%s: no 'size' or 'state'" % bw)
            bsize = _size(b["size"], bw + ".size")
            baddr = _size(b["address"], bw + ".address") if "address" in b else addr
            if not isinstance(b["state"], str):
                raise BadSnapshot("%s.state: expected a string" % bw)
            if "frames" in b:
                _frames(b["frames"], bw + ".frames")
            if isinstance(b.get("history"), (list, tuple)):
                for hi, h in enumerate(b["history"]):
                    if isinstance(h, dict) and "frames" in h:
                        _frames(h["frames"], "%s.history[%d].frames" % (bw, hi))
            if b["state"] in ACTIVE_STATES:
                final[dev]["blocks"].append((baddr, block_requested(b, bw), bsize))
            addr = baddr + bsize
    devices = set(final)
    for i, t in enumerate(traces or []):
        if t:
            devices.add(i)
    out = []
    for dev in sorted(devices):
        trace = traces[dev] if traces is not None and dev < len(traces) else []
        out.append(replay_device(dev, trace, final[dev], warn))
    return out, n_events


def replay_device(dev, trace, fin, warn):
    events = collections.Counter()
    parsed = []
    for i, e in enumerate(trace):
        w = "device %d event %d" % (dev, i)
        e = _dict(e, w)
        act = e.get("action")
        if not isinstance(act, str):
            raise BadSnapshot("%s: no 'action' string" % w)
        events[act] += 1
        if "frames" in e:
            _frames(e["frames"], w + ".frames")
        if act in ("alloc", "free_requested", "free_completed", "segment_alloc",
                   "segment_free", "segment_map", "segment_unmap"):
            if "addr" not in e or "size" not in e:
                raise BadSnapshot("%s (%s): no 'addr' or 'size'" % (w, act))
            parsed.append((act, _size(e["addr"], w + ".addr"), _size(e["size"], w + ".size")))
        else:
            if act == "oom" and "size" in e:
                _size(e["size"], w + ".size")
            parsed.append((act, 0, 0))

    # pass 1: which frees end allocations made before recording, warnings
    live = {}
    known = set()
    ever_alloc = set()
    unmatched = {}  # event index -> size: frees of allocations made before recording
    effect = []  # per event: bytes added (+) or removed (-), and the address
    start = 0
    seg_net = 0
    for i, (act, addr, size) in enumerate(parsed):
        d = 0
        if act == "alloc":
            if addr in live:
                warn("device %d event %d: alloc at 0x%x, which is live (alloc'd at event "
                     "%d): the earlier allocation is taken as freed" % (dev, i, addr, live[addr][1]))
                d -= live[addr][0]
            live[addr] = (size, i)
            known.add(addr)
            ever_alloc.add(addr)
            d += size
        elif act == "free_completed":
            if addr in live:
                asize, ai = live.pop(addr)
                if asize != size:
                    warn("device %d event %d: free_completed of 0x%x with size %d, its alloc "
                         "(event %d) has %d: the alloc's size is used" % (dev, i, addr, size, ai, asize))
                d = -asize
            elif addr in known:
                warn("device %d event %d: double free of 0x%x (already freed): ignored"
                     % (dev, i, addr))
            else:
                known.add(addr)
                unmatched[i] = size
                start += size
                d = -size
        elif act in ("segment_alloc", "segment_map"):
            seg_net += size
        elif act in ("segment_free", "segment_unmap"):
            seg_net -= size
        effect.append(d)
    # final active blocks that no allocation live at the end of the trace accounts for
    # (MemoryViz.js's rule: "actively allocated in segments, but no matching alloc in trace")
    pre = [(a, r) for (a, r, s) in fin["blocks"] if a not in live]
    start += sum(r for a, r in pre)
    end_requested = sum(r for a, r, s in fin["blocks"])
    end_allocated = sum(s for a, r, s in fin["blocks"])
    end_reserved = fin["reserved"]

    # pass 2: the running totals
    cur = start
    peak, peak_event = start, -1
    res = end_reserved - seg_net
    peak_res = res
    for i, (act, addr, size) in enumerate(parsed):
        cur += effect[i]
        if cur > peak:
            peak, peak_event = cur, i
        if act in ("segment_alloc", "segment_map"):
            res += size
        elif act in ("segment_free", "segment_unmap"):
            res -= size
        if res > peak_res:
            peak_res = res
    if res < 0 or end_reserved - seg_net < 0:
        warn("device %d: reserved bytes go below zero in the replay (the trace frees "
             "segments the final state cannot account for)" % dev)
    if parsed and cur != end_requested:
        warn("device %d: the replay ends at %d requested bytes, the final blocks hold %d "
             "(difference %d): the trace and the final segments disagree"
             % (dev, cur, end_requested, cur - end_requested))
    if not parsed:
        peak, peak_event = end_requested, -1
        peak_res = end_reserved

    # the live allocations at the peak: those from before recording (final blocks the
    # trace never allocs; frees of unknown addresses not yet reached), and the trace's
    # allocations live after event peak_event
    if not parsed:
        sizes = [r for a, r, s in fin["blocks"]]
    else:
        sizes = [r for a, r in pre]
        sizes += [s for i, s in unmatched.items() if i > peak_event]
        liv = {}
        for act, addr, size in parsed[:peak_event + 1]:
            if act == "alloc":
                liv[addr] = size
            elif act == "free_completed" and addr in liv:
                del liv[addr]
        sizes += list(liv.values())
    sizes.sort(reverse=True)
    # each size fits 64 bits, but what is live together must too (no GPU holds more)
    for what, v in (("the peak's bytes", peak), ("the reserved bytes", peak_res),
                    ("the end's bytes", max(end_requested, end_allocated, end_reserved))):
        if v >= 1 << 63:
            raise BadSnapshot("device %d: %s pass 2^63 - 1" % (dev, what))
    return {
        "device": dev,
        "events": dict(sorted(events.items())),
        "peak_requested_bytes": peak,
        "peak_event": peak_event,
        "peak_reserved_bytes": peak_res,
        "end_requested_bytes": end_requested,
        "end_allocated_bytes": end_allocated,
        "end_reserved_bytes": end_reserved,
        "top10_at_peak": sizes[:10],
    }


def reference(path, warn=None):
    warn = warn or (lambda m: print("snapshot_ref: warning: %s" % m, file=sys.stderr))
    data = load(path)
    devs, n_events = replay(data, warn)
    if n_events == 1:
        warn("%s: the trace holds one event: the program called the old "
             "_record_memory_history(True), whose ring keeps one entry; record with "
             "torch.cuda.memory._record_memory_history(max_entries=100000)" % path)
    return {"devices": devs}


FIELDS = ("device", "events", "peak_requested_bytes", "peak_event", "peak_reserved_bytes",
          "end_requested_bytes", "end_allocated_bytes", "end_reserved_bytes")


def compare(ref, got):
    """Differences between the reference and modelprof's JSON (its memory.devices[])."""
    diffs = []
    gdevs = got.get("memory", got).get("devices", [])
    rdevs = ref["devices"]
    if [d["device"] for d in rdevs] != [d.get("device") for d in gdevs]:
        return ["devices: reference %s, modelprof %s"
                % ([d["device"] for d in rdevs], [d.get("device") for d in gdevs])]
    for r, g in zip(rdevs, gdevs):
        for k in FIELDS:
            if r[k] != g.get(k):
                diffs.append("device %d %s: reference %r, modelprof %r" % (r["device"], k, r[k], g.get(k)))
        top = [t.get("size_bytes") for t in g.get("top_at_peak", [])][:10]
        if top != r["top10_at_peak"]:
            diffs.append("device %d top10_at_peak: reference %r, modelprof %r"
                         % (r["device"], r["top10_at_peak"], top))
    return diffs


def main(argv):
    args = argv[1:]
    check = None
    if "--check" in args:
        i = args.index("--check")
        check = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        ref = reference(args[0])
    except BadSnapshot as e:
        print("snapshot_ref: %s" % e, file=sys.stderr)
        return 2
    if check is None:
        print(json.dumps(ref, indent=1))
        return 0
    with open(check, encoding="utf-8") as f:
        got = json.load(f)
    diffs = compare(ref, got)
    for d in diffs:
        print(d)
    print("%s: %s" % (args[0], "equal" if not diffs else "%d differences" % len(diffs)))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

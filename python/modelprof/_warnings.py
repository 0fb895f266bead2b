"""The exporters' warnings: the export is the package's business, not the
user's. While an exporter runs, its warnings (Python's and the C++ ones
PyTorch turns into Python warnings) are collected instead of printed;
afterwards the ones that change what the profile holds are said in one line
of the package's own, on stderr. verbose=True lets them all through as the
exporter writes them.

What matters (each rule from what the warning means for the exported graph):
  - a TracerWarning that fixed a Python decision on a tensor's value (a
    branch, a loop count, a size turned into a number): the graph is the
    path these inputs took. One on an assertion (an `assert` line, or
    torch._assert) is left out: an assertion does not choose a path, the
    graph is the same either way;
  - an in-place update the exporter removed ("Removing mutation from node
    ...") of anything but a BatchNorm's num_batches_tracked: that work is
    not in the graph. num_batches_tracked is left out: one scalar add per
    BatchNorm in train mode (torch.nn.modules.batchnorm), no figure the
    profile gives.
Everything else (the exporter's notes about ONNX itself: opsets, constant
folding, deprecations) does not change the figures and stays quiet."""
import contextlib
import linecache
import os
import sys
import traceback
import warnings

_TORCH_DIR = None
_HERE = os.path.dirname(os.path.abspath(__file__))


def _torch_dir():
    global _TORCH_DIR
    if _TORCH_DIR is None:
        import torch
        _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
    return _TORCH_DIR


def _model_frame(stack):
    """The innermost frame outside torch and this package: the model's own
    line that led to the warning (filename, lineno, source line)."""
    tdir = _torch_dir()
    for fr in reversed(stack):
        f = os.path.abspath(fr.filename)
        if f.startswith(tdir + os.sep) or f.startswith(_HERE + os.sep) or f == __file__:
            continue
        if os.path.basename(f) in ("warnings.py", "contextlib.py"):
            continue
        return fr.filename, fr.lineno, (fr.line or linecache.getline(fr.filename, fr.lineno)).strip()
    return None


class Collected:
    """The warnings of one export: (category name, first line, model frame,
    is_assert) each."""

    def __init__(self):
        self.items = []

    def add(self, message, category, filename, lineno, stack):
        text = str(message).strip().split("\n")[0]
        where = _model_frame(stack)
        in_assert = any(fr.name == "_assert" and os.path.abspath(fr.filename).startswith(
            _torch_dir() + os.sep) for fr in stack) or \
            (where is not None and where[2].startswith("assert "))
        self.items.append((category.__name__, text, where, in_assert))

    def that_matter(self):
        """(tracer decisions, removed updates): the warnings that change
        what the profile holds (the module docstring's rules)."""
        decisions, updates = [], []
        for cat, text, where, in_assert in self.items:
            if cat == "TracerWarning":
                if not in_assert:
                    decisions.append((text, where))
            elif "Removing mutation" in text:
                if "num_batches_tracked" not in text:
                    updates.append((text, where))
        return decisions, updates

    def line(self):
        """The one line to print, or None."""
        decisions, updates = self.that_matter()
        parts = []
        if decisions:
            text, where = decisions[0]
            at = " at %s:%d" % (os.path.basename(where[0]), where[1]) if where else ""
            parts.append("the export fixed %d Python decision%s on tensor values at these inputs "
                         "(first%s: %s): the profile is of the path these inputs take"
                         % (len(decisions), "" if len(decisions) == 1 else "s", at,
                            _short(text)))
        if updates:
            parts.append("the export left out %d in-place update%s (first: %s): their work is not "
                         "counted" % (len(updates), "" if len(updates) == 1 else "s",
                                      _short(updates[0][0])))
        if not parts:
            return None
        return "modelprof: %s (verbose=True shows the exporter's %d warning%s)\n" % (
            "; ".join(parts), len(self.items), "" if len(self.items) == 1 else "s")


def _short(text, n=120):
    text = text.replace("ONNX Preprocess - ", "")
    cut = text.find(". ")
    if 0 < cut < n:
        text = text[:cut]
    return text if len(text) <= n else text[:n - 3] + "..."


@contextlib.contextmanager
def quiet(verbose=False):
    """Collects the warnings raised inside (nothing when verbose) and, on
    leaving, writes the one line of those that matter to stderr. Yields the
    Collected."""
    got = Collected()
    if verbose:
        yield got
        return
    # the filters in force stay (torch's own: TracerWarnings of its library
    # ignored, as torch.jit sets them; the user's): only where a warning
    # that passes them goes changes
    with warnings.catch_warnings():
        def show(message, category, filename, lineno, file=None, line=None):
            got.add(message, category, filename, lineno, traceback.extract_stack()[:-1])
        warnings.showwarning = show
        yield got
    text = got.line()
    if text:
        sys.stderr.write(text)

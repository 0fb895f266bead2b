"""modelprof.plan: the training (or inference) plan of a PyTorch model, as
`modelprof plan` makes it from an export. The options are the command's
plan flags as keywords, handed to the library as flag/value strings
(mp_tplan_profile_string): the library parses them with the command's own
table (src/plan/options.c), so no option is mirrored here."""
import json

from . import _lib, torchprof
from ._lib import ModelprofError


def _flags(options):
    """Keywords -> (flag, value) pairs: micro_batches=4 -> ("micro_batches",
    "4"); True -> the switch; False or None -> not set."""
    out = []
    for k, v in options.items():
        if v is None or v is False:
            continue
        out.append((k, None if v is True else str(v)))
    return out


def model_dropout(model):
    """The dropout probability the model trains with: its nn.Dropout
    modules' p (the most common nonzero one; Hugging Face's BERT, GPT-2,
    OPT and T5 configurations build theirs at 0.1), None when it has none
    above 0 (Llama, Qwen, Mistral; a probability passed to a function, not
    held by a module, is not seen)."""
    import torch
    ps = [float(m.p) for m in model.modules()
          if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0]
    return max(sorted(set(ps)), key=ps.count) if ps else None


def plan(model, args=(), kwargs=None, input_shape=None, verbose=False, **options):
    """The plan of training `model` called as model(*args, **kwargs) (or on
    a tensor of input_shape): the `plan` object of `modelprof plan --format
    json` (docs/JSON.md, "Training plan") as a dict. Every plan option of
    the command is a keyword: gpu="h100-sxm", precision="bf16-mixed",
    optimizer="adamw", zero=3, micro_batches=4, checkpointing=True,
    inference=True, ... (True sets a switch; False or None leaves it out).
    The model is exported as get_model_profile exports it (eval mode; a
    model on the meta device, built without weights, plans as the same
    model with weights does). An unknown option or a bad value raises
    ModelprofError naming the flag. The export (eval mode) has no Dropout:
    a training plan takes the model's own probability (model_dropout) as
    --dropout unless dropout= is given (dropout=0: none)."""
    torchprof.check_module("plan", model)
    if "dropout" not in options and not options.get("inference"):
        p = model_dropout(model)
        if p is not None:
            options = dict(options, dropout=p)
    flags = _flags(options)
    for f, _ in flags:    # before the export: a typo costs nothing
        if _lib.LIB.mp_tplan_option_kind(f.encode()) < 0:
            raise ModelprofError("plan: '%s' is not a plan option (modelprof plan --help lists "
                                 "them)" % f, "usage")
    with torchprof._profiled("plan", model, input_shape, args, kwargs, verbose=verbose) as p:
        doc = json.loads(p.plan(flags, _lib.JSON))
        torchprof.say_unrun(model, doc["plan"]["params"], lambda: p.json()["modules"], planned=True)
    return doc["plan"]

"""Command-line front ends (``scripts/svi_train.py``, ``scripts/evaluate.py``): parse, then call the package.

Errors in the input are printed as one line (``error: ...``) with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path

from ..config import DEVICES, Config, flag
from ..errors import PyroinvError
from ..model.lie import SAMPLINGS
from ..run.runtime import keep_freed_memory, subnormals_flushed

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are a single line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)


def _number(kind: Callable, positive: bool, what: str) -> Callable[[str], float]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if positive and value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be positive")
        return value

    return parse


pos_int = _number(int, True, "a positive integer")
pos_float = _number(float, True, "a positive number")
any_float = _number(float, False, "a number")


#: how the command line parses each kind of setting (:data:`pyroinv.config.KINDS`); the rule itself is Config's
PARSERS: dict[str, Callable[[str], object]] = {
    "pos_int": pos_int,
    "count": int,
    "int": int,
    "pos_float": pos_float,
    "nonneg_float": any_float,
    "float": any_float,
    "str": str,
}


def add_config_flags(p: argparse.ArgumentParser) -> None:
    """One flag for every :class:`Config` field, read off its metadata (:func:`pyroinv.config.setting`): help,
    choices, how it parses, how many values; the default is the field's."""
    d = Config()
    for f in fields(Config):
        meta, default = f.metadata, getattr(d, f.name)
        kwargs: dict = {"default": default, "help": meta["help"]}
        if meta["kind"] == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif meta["kind"] == "choice":
            kwargs["choices"] = list(meta["choices"])
        else:
            kwargs["type"] = PARSERS[meta["kind"]]
        if meta["nargs"] is not None:
            kwargs["nargs"] = meta["nargs"]
            if meta["nargs"] == "+":  # one value or one per item; a single default stays one value
                kwargs["default"] = [default]
        if meta["metavar"] is not None:
            kwargs["metavar"] = meta["metavar"]
        p.add_argument(flag(f.name), **kwargs)


def train_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="svi_train.py",
        description="Learn which invariance the data has: train an invariant "
        "network (the paper's shallow one, a deeper MLP or a CNN) by SVI on a lower bound of the "
        "marginal likelihood, by a Laplace evidence, or by maximum likelihood.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_config_flags(p)
    p.add_argument(
        "--out", type=Path, default=None, help="run folder (default runs/DATASET-INVARIANCE-NETWORK-INFERENCE-sSEED)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its checkpoint (flags not given are taken from the run)",
    )
    p.add_argument("--data-root", default=None, help="folder with your own MNIST IDX files or CIFAR-10 batches")
    p.add_argument(
        "--cache-dir", default=None, help="cache for converted data (default $PYROINV_CACHE or ~/.cache/pyroinv)"
    )
    p.add_argument("--log-every", type=pos_int, default=10, help="steps between metric records")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="tqdm progress bar (default: when attached to a terminal)",
    )
    p.add_argument(
        "--cuda-graph",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="on a CUDA device, replay the training step as a CUDA graph (default: on, unless "
        "$PYROINV_CUDA_GRAPH is 0; never for --inference laplace)",
    )
    return p


def _config_values(args: argparse.Namespace) -> dict:
    """The parsed flags that are :class:`Config` fields (one ``--init-eta`` value stays a number)."""
    names = {f.name for f in fields(Config)}
    values = {k: v for k, v in vars(args).items() if k in names}
    if isinstance(values.get("init_eta"), list) and len(values["init_eta"]) == 1:
        values["init_eta"] = values["init_eta"][0]  # one value: the same for every generator
    return values


def config_from_args(args: argparse.Namespace) -> Config:
    return Config(**_config_values(args))  # validated once, by the run (InvariantClassifier.from_config)


def default_out(cfg: Config) -> Path:
    name = Path(cfg.dataset).stem if cfg.dataset.endswith(".npz") else cfg.dataset
    return Path("runs") / f"{name}-{cfg.invariance}-{cfg.network}-{cfg.inference}-s{cfg.seed}"


class _StderrHandler(logging.StreamHandler):
    """A stream handler that writes to whatever ``sys.stderr`` is at the time of each record (a handler that
    kept the stream it was created with would write into a closed one after a caller swapped stderr)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def setup_logging() -> None:
    """Plain ``INFO`` lines from pyroinv's logger on stderr (other libraries stay quiet)."""
    logger = logging.getLogger("pyroinv")
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def given_flags(argv: Sequence[str]) -> set[str]:
    """Names (``snake_case``) of the options written on the command line."""
    names = set()
    for a in argv:
        if a.startswith("--"):
            names.add(a[2:].split("=", 1)[0].replace("-", "_"))
    return names


def resume_config(args: argparse.Namespace, argv: Sequence[str], out: Path) -> Config:
    """With ``--resume``: the saved configuration, overridden only by the flags actually given.

    A given flag that differs from the saved value is then reported by the run as a mismatch.
    """
    from ..files import read_config

    saved = read_config(out / "config.json")
    names = {f.name for f in fields(Config)}
    given = given_flags(argv) & names
    return Config.from_dict({**saved, **{k: v for k, v in _config_values(args).items() if k in given}})


def train_main(argv: Sequence[str] | None = None) -> int:
    """``svi_train.py``: parse arguments, run, print results; one-line errors."""
    from ..run.experiment import Interrupted

    argv = list(sys.argv[1:] if argv is None else argv)
    args = train_parser().parse_args(argv)
    setup_logging()
    keep_freed_memory()
    try:
        with subnormals_flushed():
            return _train(args, argv)
    except Interrupted as err:  # the checkpoint is written; exit as a process stopped by that signal would
        sys.stderr.write(f"{err}\n")
        return 128 + err.signum
    except PyroinvError as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_USAGE


def _train(args: argparse.Namespace, argv: list[str]) -> int:
    """:func:`train_main` after parsing: the run, or a :class:`PyroinvError`."""
    from ..run.experiment import run_experiment

    cfg = config_from_args(args)
    out = args.out or default_out(cfg)
    if args.resume and (out / "config.json").exists():
        cfg = resume_config(args, argv, out)
    run_experiment(
        cfg,
        out,
        resume=args.resume,
        data_root=args.data_root,
        cache_dir=args.cache_dir,
        progress=args.progress,
        log_every=args.log_every,
        cuda_graph=args.cuda_graph,
    )
    return 0


def evaluate_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="evaluate.py",
        description="Evaluate a saved run on any data set variant (e.g. trained on mnist, evaluated on mnist-rot).",
    )
    p.add_argument("run", type=Path, help="run folder written by svi_train.py (--out)")
    p.add_argument("--dataset", default=None, help="data set to evaluate on (default: the one trained on)")
    p.add_argument("--test-size", type=pos_int, default=None, help="class-balanced subset of the test set")
    p.add_argument("--draws", type=pos_int, default=None, help="W2 draws for the posterior predictive")
    p.add_argument(
        "--split",
        choices=("test", "valid"),
        default="test",
        help="valid: the validation set the run held out of its training set (--valid-size), to choose "
        "evaluation settings such as --samples without the test set",
    )
    p.add_argument(
        "--samples",
        type=pos_int,
        default=None,
        help="transforms S averaged per prediction (default: the run's S); more gives a closer Monte-Carlo "
        "estimate of the same invariant predictive",
    )
    p.add_argument(
        "--sampling",
        choices=SAMPLINGS,
        default=None,
        help="how the S transforms are drawn (default: the run's): eps ~ U[-1,1]^k, or a midpoint grid",
    )
    p.add_argument("--device", choices=DEVICES, default="auto", help="auto picks CUDA when available")
    p.add_argument("--data-root", default=None, help="folder with your own MNIST IDX files or CIFAR-10 batches")
    p.add_argument("--cache-dir", default=None, help="data cache (default $PYROINV_CACHE or ~/.cache/pyroinv)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    """``evaluate.py``: accuracy, NLL and the learned invariance of a saved run on a data set."""
    import json

    from ..run.analysis import evaluate_run

    args = evaluate_parser().parse_args(argv)
    setup_logging()
    keep_freed_memory()
    try:
        with subnormals_flushed():
            res = evaluate_run(
                args.run,
                dataset=args.dataset,
                data_root=args.data_root,
                cache_dir=args.cache_dir,
                test_size=args.test_size,
                draws=args.draws,
                samples=args.samples,
                split=args.split,
                device=args.device,
                sampling=args.sampling,
            )
    except PyroinvError as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_USAGE
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        split = res["split"]
        print(
            f"{res['run']} (trained on {res['trained_on']}, step {res['step']}) evaluated on "
            f"{res['evaluated_on']} ({res[split + '_size']} {split} images, S = {res['samples']} {res['sampling']} "
            "transforms):"
        )
        print(
            f"  {split} accuracy {100 * res[split + '_accuracy']:.2f}%   {split} NLL {res[split + '_nll']:.4f}   "
            f"learned invariance: {res['learned_invariance']}"
        )
        print(
            f"  inactive units: {100 * res['inactive_units']:.1f}% of the last hidden layer's (zero on every one of "
            f"these images under every transform)"
        )
        q = res["units_under_q"]
        print(
            f"  {100 * q['units_for_99pct_power']:.1f}% of the units carry 99% of the layer's mean squared "
            "activation (units shrunk towards zero count as weak, not as off)"
        )
        parts = [
            f"{name} units' |mean| {q[name + '_mean_rms']:.2f}, sd {q[name + '_sd_rms']:.2f}"
            for name in ("live", "dead")
            if q[name + "_mean_rms"] is not None
        ]
        if parts:
            print(f"  q of W2 against the prior's sd (rms over classes and units): {'; '.join(parts)}")
        pairs = ", ".join(f"{t} as {p} ({n})" for t, p, n in res["most_confused"])
        print(f"  most confused (true as predicted): {pairs or 'none'}; {res['errors']} errors in all")
    return 0

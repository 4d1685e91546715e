#!/usr/bin/env python
"""``pyroinv benchmark`` (and ``scripts/benchmark.py``): time the weight-space invariant network's paths against each other and the matrix-product floor.

    python scripts/benchmark.py                 # paper settings: MNIST 28x28, H=1024, S=32, batch 128 and 1024
    python scripts/benchmark.py --device cuda   # the same on the GPU
    python scripts/benchmark.py --quick         # small settings, seconds (used by the tests)
    python scripts/benchmark.py --compile       # and the pyroinv step under torch.compile
    python scripts/benchmark.py --memory        # the memory estimate of a run against measured peaks
    python scripts/benchmark.py --pyro-elbos    # Pyro's own SVI step with each ELBO; --guides, --predictive likewise
    python scripts/benchmark.py --guides cholesky --networks cnn --hidden 256 --samples 31 --batches 128 --threads 1
                                                # the deeper networks' whole training step

On the CPU every path is timed in its own process, so the peak memory column is that path's own;
on CUDA the allocator's peak is reset between paths. Every process first calls pyroinv.run.runtime.keep_freed_memory()
(as the training scripts do) unless --default-malloc is given, and flushes subnormal floats to zero.
"""  # noqa: E501  (the first line, whole, is the --help description)

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from pyroinv.config import GUIDES
from pyroinv.model.registry import NETWORKS

from .train import EXIT_USAGE, OneLineParser, pos_int

#: the networks with the weight-space paths the main table compares (naive, pyroinv, input-aug, floor)
WEIGHT_SPACE = ("relu", "rff")


def measure(args) -> dict:
    from pyroinv.run.runtime import keep_freed_memory, subnormals_flushed

    if not args.default_malloc:
        keep_freed_memory()
    with subnormals_flushed():  # as the training scripts do
        return _measure(args)


def _measure(args) -> dict:
    import torch

    from pyroinv.inference.benchmark import (
        COMPILED,
        eval_function,
        peak_memory_mb,
        queued,
        step_function,
        svi_step_function,
        time_call,
    )

    torch.set_num_threads(args.threads)
    if args.kind == "predictive":
        from pyroinv.inference.benchmark import predictive_function

        fn: Callable[[], object] = predictive_function(
            hidden=args.hidden, samples=args.samples, n_test=args.n_test, device=args.device
        )
        seconds = time_call(fn, repeats=1, warmup=0, device=args.device)
        return {"seconds": seconds, "peak_mb": peak_memory_mb(args.device)}
    if args.kind == "pyro-svi":
        from pyroinv.inference.benchmark import pyro_svi_step_function

        fn = pyro_svi_step_function(
            args.path,
            network=args.network,
            hidden=args.hidden,
            samples=args.samples,
            batch=args.batch,
            device=args.device,
        )
        seconds = time_call(fn, repeats=args.repeats, device=args.device)
    elif args.kind == "svi":
        step = svi_step_function(
            network=args.network,
            hidden=args.hidden,
            samples=args.samples,
            batch=args.batch,
            device=args.device,
            guide=args.guide,
            num_train=args.step_data,
            cuda_graph=args.graph,
            precision=args.precision,
        )
        result: dict[str, Any] = {
            "seconds": time_call(step, repeats=args.repeats, device=args.device),
            "peak_mb": peak_memory_mb(args.device),
        }
        if args.queued:
            result["queued_seconds"] = (
                time_call(queued(step, QUEUED_STEPS), repeats=max(1, args.repeats // 3), warmup=1, device=args.device)
                / QUEUED_STEPS
            )
        if args.profile:
            result["profile"] = profile_table(queued(step, 1), args.device)
        return result
    elif args.kind == "step":
        fn = step_function(
            args.path,
            network=args.network,
            hidden=args.hidden,
            samples=args.samples,
            batch=args.batch,
            device=args.device,
            precision=args.precision,
        )
        result = {}
        if args.path == COMPILED:  # its first call compiles
            result["first_call_seconds"] = time_call(fn, repeats=1, warmup=0, device=args.device)
        result.update(
            seconds=time_call(fn, repeats=args.repeats, device=args.device), peak_mb=peak_memory_mb(args.device)
        )
        if args.profile:
            result["profile"] = profile_table(fn, args.device)
        return result
    elif args.kind == "memory":
        from pyroinv.inference.benchmark import training_memory

        return training_memory(
            network=args.network,
            hidden=args.hidden,
            samples=args.samples,
            batch=args.batch,
            num_train=args.num_train,
            inference=args.inference,
            device=args.device,
        )
    else:
        fn = eval_function(
            args.path,
            network=args.network,
            hidden=args.hidden,
            samples=args.samples,
            n_test=args.n_test,
            batch=args.batch,
            device=args.device,
        )
        seconds = time_call(fn, repeats=max(1, args.repeats // 3), warmup=1, device=args.device)
    return {"seconds": seconds, "peak_mb": peak_memory_mb(args.device)}


#: training steps queued back to back in the whole step's ``queued`` timing
QUEUED_STEPS = 10


def profile_table(fn, device: str, steps: int = 3, rows: int = 12) -> str:
    """torch.profiler's table of the operators that take the most time over ``steps`` calls, headed by how much work
    a call launches: on CUDA the kernels, copies and fills the device runs; on the CPU the operators called from
    Python (their inner operators not counted)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            fn()
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    if cuda:
        launched = sum(e.device_type == DeviceType.CUDA for e in events)
        what = "device kernels, copies and fills"
    else:
        launched = sum(e.name.startswith("aten::") and not _inside_an_operator(e) for e in events)
        what = "operators"
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    return f"{steps} steps ({launched / steps:.0f} {what} a step):\n" + prof.key_averages().table(
        sort_by=key, row_limit=rows, max_name_column_width=40
    )


def _inside_an_operator(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def run_one(args, base: list[str], **kw) -> dict:
    """Measure one path: in a fresh process on the CPU (its own peak resident memory); in this
    process on CUDA, where the allocator's peak is reset and its cache emptied between paths."""
    if args.device == "cuda":
        import torch

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        return measure(argparse.Namespace(**{**vars(args), **kw}))
    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f"={v}") for k, v in kw.items()]
    cmd = [sys.executable, "-m", "pyroinv.frontends.benchmark", "--single", *base, *flags]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child_args(args: argparse.Namespace, *extra: str) -> list[str]:
    """The measuring child's flags: the sizes, threads and device of ``args``, and the ``extra`` settings named."""
    names = ("hidden", "samples", *extra, "threads", "device")
    return [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in names]


def describe_device(device: str) -> str:
    import torch

    from pyroinv.inference.build import device_name

    return device_name(device) + (f" (CUDA {torch.version.cuda})" if device == "cuda" else "")


#: (network, hidden, samples, batch, training images, inference) of the memory table
MEMORY_SETTINGS = [
    ("relu", 64, 4, 16, 2048, "vi"),
    ("relu", 128, 64, 256, 2048, "vi"),
    ("relu", 256, 32, 128, 2048, "vi"),
    ("relu", 256, 16, 512, 2048, "vi"),
    ("relu", 512, 16, 128, 2048, "vi"),
    ("relu", 512, 16, 128, 20000, "vi"),
    ("relu", 512, 16, 128, 40000, "vi"),
    ("relu", 512, 128, 128, 2048, "vi"),
    ("relu", 1024, 32, 128, 2048, "vi"),
    ("rff", 1024, 32, 128, 2048, "vi"),
    ("relu", 1024, 32, 128, 2048, "ml"),
    ("relu", 1024, 64, 256, 2048, "vi"),
    ("relu", 1024, 32, 1024, 2048, "vi"),
    ("relu", 1536, 8, 32, 2048, "ml"),
    ("relu", 2048, 4, 32, 2048, "vi"),
    ("relu", 2048, 8, 64, 2048, "vi"),
]


def memory_table(args) -> int:
    """pyroinv.inference.memory's estimate against the measured peak of 3 training steps, each in its own process."""
    what = "peak GPU MiB allocated" if args.device == "cuda" else "growth of the peak resident MiB"
    print(
        f"{describe_device(args.device)}; 28x28 inputs, 10 classes; {what} from just before the Trainer is built "
        f"to after 3 training steps\n"
    )
    print(
        "| network | H | S | B | N | inference | estimated MiB | measured MiB | error |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    for net, hidden, samples, batch, n, inference in MEMORY_SETTINGS:
        args.hidden, args.samples = hidden, samples
        base = [f"--hidden={hidden}", f"--samples={samples}", f"--threads={args.threads}", f"--device={args.device}"]
        r = run_one(args, base, kind="memory", network=net, batch=batch, num_train=n, inference=inference)
        err = (r["estimated_mb"] - r["measured_mb"]) / r["measured_mb"]
        print(
            f"| {net} | {hidden} | {samples} | {batch} | {n} | {inference} | {r['estimated_mb']:.0f} | "
            f"{r['measured_mb']:.0f} | {err:+.0%} |",
            flush=True,
        )
    return 0


def pyro_elbo_table(args) -> int:
    """Pyro's own SVI step with each of Pyro's ELBOs on the package's model, against ``Trainer.train_step``."""
    from pyroinv.inference.benchmark import PYRO_ELBOS

    print(
        f"{describe_device(args.device)}; H={args.hidden}, S={args.samples}; median of {args.repeats} steps after 2 "
        f"(the JIT ELBOs compile in those)\n"
    )
    print("| network | batch | " + " | ".join(f"SVI, {e}" for e in PYRO_ELBOS) + " | Trainer.train_step |")
    print("|---|---|" + "---|" * (len(PYRO_ELBOS) + 1))
    base = child_args(args, "repeats")
    for net in args.networks:
        for batch in args.batches:
            t = {
                e: run_one(args, base, kind="pyro-svi", path=e, network=net, batch=batch)["seconds"] for e in PYRO_ELBOS
            }
            own = run_one(args, base, kind="svi", network=net, batch=batch)["seconds"]
            print(
                f"| {net} | {batch} | " + " | ".join(f"{t[e]:.4f} s" for e in PYRO_ELBOS) + f" | {own:.4f} s |",
                flush=True,
            )
    return 0


def parser() -> argparse.ArgumentParser:
    """``benchmark.py``'s flags."""
    p = OneLineParser(
        prog="benchmark.py",
        description=__doc__.splitlines()[0].split(": ", 1)[-1],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--hidden", type=pos_int, default=1024)
    p.add_argument("--samples", type=pos_int, default=32)
    p.add_argument("--batches", type=pos_int, nargs="+", default=[128, 1024], help="training batch sizes")
    p.add_argument(
        "--eval-batches",
        type=pos_int,
        nargs="+",
        default=[128, 500],
        help="evaluation batch sizes (the same for both paths)",
    )
    p.add_argument(
        "--networks",
        nargs="+",
        choices=list(NETWORKS),
        default=list(WEIGHT_SPACE),
        help="the deeper networks (mlp, cnn) with --guides only: the whole training step",
    )
    p.add_argument("--n-test", type=pos_int, default=10000, help="test images for the evaluation throughput")
    p.add_argument("--repeats", type=pos_int, default=7, help="timed repetitions (median reported)")
    p.add_argument("--threads", type=pos_int, default=2, help="torch threads (CPU)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    p.add_argument(
        "--default-malloc", action="store_true", help="leave the C allocator's settings alone (see pyroinv.run.runtime)"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="also print torch.profiler's operator table of every pyroinv training step measured and of "
        "the whole training step (with the kernels a step launches)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="also time the pyroinv training step with its loss wrapped in torch.compile",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="only the memory table: pyroinv.inference.memory's estimate of a run against the measured peak "
        "of its first training steps, at 16 settings (each in its own process)",
    )
    p.add_argument(
        "--guides",
        nargs="+",
        choices=GUIDES,
        default=None,
        help="time a whole training step with each of these guides (q's families of --guide)",
    )
    p.add_argument("--guide", default="cholesky", help=argparse.SUPPRESS)
    p.add_argument(
        "--step-data",
        type=pos_int,
        default=None,
        metavar="N",
        help="random training images behind the whole-step timing (default: four batches)",
    )
    p.add_argument(
        "--predictive",
        action="store_true",
        help="time and peak memory of pyro.infer.Predictive (16 samples of y and W2) over --n-test images",
    )
    p.add_argument(
        "--pyro-elbos",
        action="store_true",
        help="time Pyro's own SVI step with each of Pyro's ELBOs (JIT ones too) against Trainer.train_step",
    )
    p.add_argument(
        "--precisions",
        nargs="+",
        choices=["fp32", "bf16"],
        default=None,
        help="only the precision table: the network's step, its floor (the same product alone) and the whole "
        "training step in each of these precisions (--precision of svi_train.py)",
    )
    p.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="H=64, S=4, batch 16, 200 test images, 2 repeats")
    p.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kind", default="step", help=argparse.SUPPRESS)
    p.add_argument("--path", default="pyroinv", help=argparse.SUPPRESS)
    p.add_argument("--network", default="relu", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=128, help=argparse.SUPPRESS)
    p.add_argument("--num-train", type=int, default=2048, help=argparse.SUPPRESS)
    p.add_argument("--inference", default="vi", help=argparse.SUPPRESS)
    p.add_argument("--queued", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--graph", action="store_true", help=argparse.SUPPRESS)
    return p


def guides_table(args: argparse.Namespace) -> int:
    """The whole training step with each of ``--guides``."""
    base = child_args(args, "repeats", *(["step_data"] if args.step_data else []))
    print(
        f"{describe_device(args.device)}; H={args.hidden}, S={args.samples}; whole training step "
        f"(Trainer.train_step), median of {args.repeats}\n"
    )
    print("| network | batch | " + " | ".join(args.guides) + " |\n|---|---|" + "---|" * len(args.guides))
    for net in args.networks:
        for batch in args.batches:
            t = [run_one(args, base, kind="svi", network=net, batch=batch, guide=g)["seconds"] for g in args.guides]
            print(f"| {net} | {batch} | " + " | ".join(f"{v:.4f} s" for v in t) + " |", flush=True)
    return 0


def precision_table(args: argparse.Namespace) -> int:
    """The network's step, its floor and the whole training step in each of ``--precisions``, and their ratios."""
    from pyroinv.model.precision import native_bf16

    base = child_args(args, "repeats")
    print(
        f"{describe_device(args.device)}; native bfloat16 products: {'yes' if native_bf16(args.device) else 'no'}; "
        f"H={args.hidden}, S={args.samples}, 28x28 inputs; median of {args.repeats}; seconds per step\n"
    )
    cols = [f"{what} ({p})" for p in args.precisions for what in ("network", "floor", "whole step, queued")]
    print("| network | batch | " + " | ".join(cols) + " | whole step / floor |\n|---|---|" + "---|" * (len(cols) + 1))
    for net in args.networks:
        for batch in args.batches:
            cells, ratios = [], []
            for precision in args.precisions:
                kw = dict(network=net, batch=batch, precision=precision)
                network = run_one(args, base, kind="step", path="pyroinv", **kw)["seconds"]
                floor = run_one(args, base, kind="step", path="floor", **kw)["seconds"]
                whole = run_one(args, base, kind="svi", queued=True, **kw)["queued_seconds"]
                cells += [f"{network:.4f}", f"{floor:.4f}", f"{whole:.4f}"]
                ratios.append(f"{whole / floor:.1f}x ({precision})")
            print(f"| {net} | {batch} | " + " | ".join(cells) + f" | {', '.join(ratios)} |", flush=True)
    return 0


def predictive_line(args: argparse.Namespace) -> int:
    """Time and peak memory of ``pyro.infer.Predictive`` over ``--n-test`` images."""
    base = child_args(args, "n_test")
    r = run_one(args, base, kind="predictive")
    what = "peak GPU MiB allocated" if args.device == "cuda" else "peak resident MiB of the process"
    print(
        f"{describe_device(args.device)}; H={args.hidden}, S={args.samples}: Predictive(model, guide=guide, "
        f"num_samples=16, return_sites=['y', 'W2']) over {args.n_test} images: {r['seconds']:.1f} s, "
        f"{r['peak_mb']:.0f} {what}"
    )
    return 0


def network_table(
    args: argparse.Namespace, base: list[str], paths: tuple[str, ...], memory: str, profiles: list[str]
) -> tuple[dict, dict]:
    """The network's training step on every path; returns its seconds and the floor's, by (network, batch)."""
    from pyroinv.inference.benchmark import COMPILED, PATHS

    print(f"\ntraining step (forward + backward of the network's log-likelihood; seconds, {memory})\n")
    compiled_ratio = " pyroinv / compiled |" if args.compile else ""
    print(
        "| network | batch | "
        + " | ".join(paths)
        + " | naive / pyroinv | input-aug / pyroinv | pyroinv / floor |"
        + compiled_ratio
    )
    print("|---|---|" + "---|" * (len(paths) + 3 + bool(args.compile)))
    network_seconds: dict[tuple[str, int], float] = {}
    floor_seconds: dict[tuple[str, int], float] = {}
    for net in args.networks:
        for batch in args.batches:
            r = {
                path: run_one(
                    args,
                    base,
                    kind="step",
                    path=path,
                    network=net,
                    batch=batch,
                    **({"profile": True} if args.profile and path == "pyroinv" else {}),
                )
                for path in paths
            }
            cells = [f"{r[q]['seconds']:.4f} s ({r[q]['peak_mb']:.0f} MiB)" for q in PATHS]
            t = {q: r[q]["seconds"] for q in paths}
            extra = ""
            if args.compile:
                cells.append(
                    f"{t[COMPILED]:.4f} s ({r[COMPILED]['peak_mb']:.0f} MiB; first call "
                    f"{r[COMPILED]['first_call_seconds']:.1f} s)"
                )
                extra = f" {t['pyroinv'] / t[COMPILED]:.2f}x |"
            network_seconds[net, batch] = t["pyroinv"]
            floor_seconds[net, batch] = t["floor"]
            print(
                f"| {net} | {batch} | " + " | ".join(cells) + f" | {t['naive'] / t['pyroinv']:.2f}x | "
                f"{t['input-aug'] / t['pyroinv']:.2f}x | {t['pyroinv'] / t['floor']:.2f}x |" + extra,
                flush=True,
            )
            if "profile" in r["pyroinv"]:
                profiles.append(f"pyroinv, {net}, batch {batch}, {r['pyroinv']['profile']}")
    return network_seconds, floor_seconds


def whole_step_table(
    args: argparse.Namespace,
    base: list[str],
    memory: str,
    network_seconds: dict,
    floor_seconds: dict,
    profiles: list[str],
) -> None:
    """The whole training step (``Trainer.train_step``), waited for and queued (and as a CUDA graph)."""
    cuda = args.device == "cuda"
    print(
        f"\nwhole training step (Trainer.train_step: Trace_ELBO, model and guide, fused Adam; seconds, {memory}): "
        f"each step waited for, and {QUEUED_STEPS} steps queued back to back as training runs them (per step)"
        + ("; on CUDA also the step replayed as a CUDA graph (pyroinv.inference.step_graph), queued" if cuda else "")
        + "\n"
    )
    print(
        "| network | batch | training step | of which the network (pyroinv above) | whole step / floor | "
        "queued steps | queued / floor | CUDA graph, queued | graph / floor |\n|---|---|---|---|---|---|---|---|---|"
    )
    for net in args.networks:
        for batch in args.batches:
            profile = {"profile": True} if args.profile else {}
            r = run_one(args, base, kind="svi", network=net, batch=batch, queued=True, **profile)
            floor = floor_seconds[net, batch]
            graphed = "– | –"
            if cuda:
                g = run_one(args, base, kind="svi", network=net, batch=batch, queued=True, graph=True, **profile)
                graphed = f"{g['queued_seconds']:.4f} s | {g['queued_seconds'] / floor:.1f}x"
                if "profile" in g:
                    profiles.append(f"whole training step (CUDA graph, queued), {net}, batch {batch}, {g['profile']}")
            print(
                f"| {net} | {batch} | {r['seconds']:.4f} s ({r['peak_mb']:.0f} MiB) | "
                f"{network_seconds[net, batch] / r['seconds']:.0%} | {r['seconds'] / floor:.1f}x | "
                f"{r['queued_seconds']:.4f} s | {r['queued_seconds'] / floor:.1f}x | {graphed} |",
                flush=True,
            )
            if "profile" in r:
                profiles.append(f"whole training step (queued), {net}, batch {batch}, {r['profile']}")


def eval_table(args: argparse.Namespace, base: list[str], memory: str) -> None:
    """Evaluation throughput of the naive and the package's path."""
    print(f"\nevaluation of {args.n_test} test images with S deterministic transforms (images per second, {memory})\n")
    print("| network | eval batch | naive (warp per batch) | pyroinv (warp once) | speed-up |\n|---|---|---|---|---|")
    for net in args.networks:
        for batch in args.eval_batches:
            r = {
                path: run_one(args, base, kind="eval", path=path, network=net, batch=batch)
                for path in ("naive", "pyroinv")
            }
            ips = {q: args.n_test / r[q]["seconds"] for q in r}
            print(
                f"| {net} | {batch} | {ips['naive']:.0f} ({r['naive']['peak_mb']:.0f} MiB) | "
                f"{ips['pyroinv']:.0f} ({r['pyroinv']['peak_mb']:.0f} MiB) | "
                f"{ips['pyroinv'] / ips['naive']:.2f}x |",
                flush=True,
            )


def speed_tables(args: argparse.Namespace) -> int:
    """The default report: the network's step on every path, the whole step, the evaluation."""
    import torch

    from pyroinv.inference.benchmark import COMPILED, PATHS

    paths = PATHS + ((COMPILED,) if args.compile else ())

    base = child_args(args, "n_test", "repeats")
    if args.default_malloc:
        base.append("--default-malloc")
    memory = "peak GPU MiB allocated" if args.device == "cuda" else "peak resident MiB"
    threads = "" if args.device == "cuda" else f", {args.threads} threads"
    print(
        f"{describe_device(args.device)}; torch {torch.__version__}{threads}; H={args.hidden}, S={args.samples}, "
        f"28x28 inputs; median of {args.repeats}; "
        f"{'default malloc' if args.default_malloc else 'freed memory kept (pyroinv.run.runtime)'}"
    )
    profiles: list[str] = []
    network_seconds, floor_seconds = network_table(args, base, paths, memory, profiles)
    whole_step_table(args, base, memory, network_seconds, floor_seconds, profiles)
    eval_table(args, base, memory)
    for text in profiles:
        print(f"\n{text}")
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.quick:
        args.hidden, args.samples, args.batches, args.eval_batches = 64, 4, [16], [50]
        args.n_test, args.repeats = 200, 2
    from pyroinv.errors import ConfigError
    from pyroinv.inference.build import resolve_device

    try:
        args.device = resolve_device(args.device).type
    except ConfigError as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_USAGE
    if args.single:
        print(json.dumps(measure(args)))
        return 0
    deeper = [n for n in args.networks if n not in WEIGHT_SPACE]
    if deeper and not args.guides:
        sys.stderr.write(
            f"error: --networks {' '.join(deeper)}: only the whole training step is timed for them; "
            f"add --guides cholesky (and --hidden 256 for the cnn's cpu-protocol width)\n"
        )
        return EXIT_USAGE
    if args.memory:
        return memory_table(args)
    if args.pyro_elbos:
        return pyro_elbo_table(args)
    if args.guides:
        return guides_table(args)
    if args.precisions:
        return precision_table(args)
    if args.predictive:
        return predictive_line(args)
    return speed_tables(args)


if __name__ == "__main__":
    sys.exit(main())

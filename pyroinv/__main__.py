"""``pyroinv COMMAND ...`` (installed with the package) and ``python -m pyroinv COMMAND ...``.

Commands: ``train`` (as ``scripts/svi_train.py``), ``evaluate`` (``scripts/evaluate.py``), ``reproduce``
(``scripts/reproduce.py``), ``sgpr`` (``scripts/sgpr_train.py``) and ``benchmark`` (``scripts/benchmark.py``); each
takes its script's flags. The
reproduction runner starts its cells this way, so a Dask worker needs the installed package, not a checkout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def _train(argv: list[str]) -> int:
    from .frontends.train import train_main

    return train_main(argv)


def _evaluate(argv: list[str]) -> int:
    from .frontends.train import evaluate_main

    return evaluate_main(argv)


def _reproduce(argv: list[str]) -> int:
    from .frontends.reproduce import main

    return main(argv)


def _benchmark(argv: list[str]) -> int:
    from .frontends.benchmark import main

    return main(argv)


def _sgpr(argv: list[str]) -> int:
    from .frontends.sgpr import main

    return main(argv)


#: command -> (its entry point, one line for the usage message)
COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "train": (_train, "train an invariant network (scripts/svi_train.py)"),
    "evaluate": (_evaluate, "evaluate a saved run on a data set (scripts/evaluate.py)"),
    "reproduce": (_reproduce, "run the paper's grids and write their tables (scripts/reproduce.py)"),
    "sgpr": (_sgpr, "the sparse-GP baseline (scripts/sgpr_train.py)"),
    "benchmark": (_benchmark, "time the network, a training step and evaluation (scripts/benchmark.py)"),
}


def usage() -> str:
    return (
        "usage: pyroinv {"
        + ",".join(COMMANDS)
        + "} ...  ("
        + "; ".join(f"{name}: {summary}" for name, (_, summary) in COMMANDS.items())
        + "; COMMAND --help for its flags)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a command; a missing or unknown command is one line and exit status 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] not in COMMANDS:
        sys.stderr.write(
            f"error: unknown command {args[0]!r}; choose one of {', '.join(COMMANDS)} (see pyroinv --help)\n"
        )
        return 2
    return COMMANDS[args[0]][0](args[1:])


if __name__ == "__main__":
    sys.exit(main())

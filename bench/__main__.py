"""`python -m bench [module ...]`: run bench_*.py modules (all of them by default), each through its main().

Arguments after `--` go to every module's main(argv), e.g. `python -m bench bench_broker -- --runs 1`.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
from pathlib import Path


def discover() -> list[str]:
    return sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        print(f"modules: {', '.join(discover())}")
        return 0
    extra: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, extra = args[:cut], args[cut + 1:]
    names = args or discover()
    unknown = [n for n in names if n not in discover()]
    if unknown:
        print(f"unknown bench module(s): {', '.join(unknown)}; have {', '.join(discover())}", file=sys.stderr)
        return 2
    failed: list[str] = []
    for name in names:
        print(f"\n=== bench.{name} ===", flush=True)
        t0 = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        try:
            # main(argv) gets the arguments after --; a main() without parameters is called bare
            if inspect.signature(module.main).parameters:
                module.main(extra)
            else:
                module.main()
        except (Exception, SystemExit) as exc:  # one failing benchmark must not hide the others' tables
            print(f"bench.{name} failed: {exc!r}", file=sys.stderr)
            failed.append(name)
        print(f"=== bench.{name}: {time.perf_counter() - t0:.1f}s ===", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""`keras-bert quickstart`: the whole path in a few minutes (``keras_bert.quickstart``)."""

from __future__ import annotations

import os
import time

from keras_bert import quickstart
from keras_bert.quickstart import QuickstartOptions, next_steps, run_quickstart


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "quickstart",
        description=quickstart.__doc__.splitlines()[0])
    defaults = QuickstartOptions()
    parser.add_argument("--output_dir", default=defaults.output_dir,
                        help="where everything goes; must be new or a previous quickstart's "
                             "(default: %(default)s)")
    parser.add_argument("--init_checkpoint", default=None,
                        help="fine-tune from this checkpoint instead of all-MiniLM-L6-v2")
    parser.add_argument("--pretrain_steps", type=int, default=defaults.pretrain_steps,
                        help="steps of the tiny pretraining run (default: %(default)s)")
    parser.add_argument("--finetune_examples", type=int, default=defaults.finetune_examples,
                        help="training sentences for the classifier (default: %(default)s)")
    parser.add_argument("--no_serve", action="store_true", help="skip the serving step")
    parser.set_defaults(run=run_command)


def run_command(args) -> int:
    options = QuickstartOptions(output_dir=args.output_dir, init_checkpoint=args.init_checkpoint,
                                pretrain_steps=args.pretrain_steps,
                                finetune_examples=args.finetune_examples,
                                serve=not args.no_serve)
    start = time.perf_counter()
    results = run_quickstart(options, report=lambda r: print(
        f"[{r.seconds:6.1f} s] {r.name}: {r.detail}", flush=True))
    print(f"\nkeras-bert quickstart finished in {time.perf_counter() - start:.0f} s")
    width = max(len(r.name) for r in results)
    for r in results:
        print(f"  {r.name:<{width}}  {r.seconds:6.1f} s  {r.detail}")
    print(f"everything is in {os.path.abspath(options.output_dir)}")
    print("\nWhat to try next:\n" + "\n".join(
        f"  {command}\n      {why}" for command, why in next_steps(options)))
    return 0

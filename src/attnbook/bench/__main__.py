"""``python -m attnbook.bench NAME``: see ``attnbook.bench``; ``induction`` (chapter 28): see
``attnbook.bench.induction``."""

import sys

from attnbook.bench import main

if sys.argv[1:2] == ["induction"]:
    from attnbook.bench.induction import main as induction

    induction(sys.argv[2:])
else:
    main()

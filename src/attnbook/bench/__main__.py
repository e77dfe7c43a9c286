"""``python -m attnbook.bench NAME``: see ``attnbook.bench``."""

from attnbook.bench import main

main()

"""``python -m tilelang``: the same command line as the ``tilelang`` console script."""

from tilelang.cli.main import main

if __name__ == "__main__":
    main()

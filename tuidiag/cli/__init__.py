"""The ``tuidiag`` command line: one module per subcommand, wired up in ``main``."""

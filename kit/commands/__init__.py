"""CLI subcommands, one module each.

Every module here exposes ``register(subparsers)`` which adds its subcommand(s) and sets
``func`` (taking the parsed ``argparse.Namespace``, returning an exit code). The CLI
discovers modules automatically, so adding a command never means editing a central list.
"""

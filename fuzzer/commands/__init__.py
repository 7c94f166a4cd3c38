"""One module per `convsmith` subcommand (see fuzzer/cli.py for the contract)."""

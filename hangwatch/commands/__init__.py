"""One module per subcommand: each has run(args, out, err) -> exit status."""

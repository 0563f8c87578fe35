"""`python -m agentcore`: the command line (see `agentcore.cli`)."""

from .cli import main

raise SystemExit(main())

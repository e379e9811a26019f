"""``python -m rk_agent`` runs the ``rk-agent`` command line."""

from rk_agent.cli import main

main()

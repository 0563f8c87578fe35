"""Output of programs a tool starts is forwarded to on_tool_output (stream="stdout"/"stderr")."""

import subprocess

from agentcore import tool


@tool(timeout=60)
def run_script(command: str) -> dict:
    """Run a shell command and report its exit code.

    Args:
        command: The command line to run with bash.
    """
    done = subprocess.run(["bash", "-c", command])
    return {"exit_code": done.returncode}

"""A throwaway self-signed certificate for `ModelServer(tls=...)`, made with the openssl CLI.

    cert, key = self_signed(tmp_path)          # files in tmp_path, valid for "localhost"
    with ModelServer(tls=(cert, key)) as server:
        os.environ["REQUESTS_CA_BUNDLE"] = cert   # the client trusts it like any CA bundle

Stdlib only: the certificate comes from `openssl req -x509`, so nothing is added to the
library's dependencies. Raises `RuntimeError` when no `openssl` program is on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def self_signed(directory: str | os.PathLike[str], host: str = "localhost") -> tuple[str, str]:
    """Write `cert.pem` and `key.pem` for `host` (also 127.0.0.1) into `directory`; return their paths."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("self_signed() needs the openssl program on PATH")
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", key, "-out", cert, "-subj", f"/CN={host}",
            "-addext", f"subjectAltName=DNS:{host},IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key

"""Fixtures of the wire tests: a self-signed certificate the client trusts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from agentcore.testing.tls import self_signed


@pytest.fixture(scope="session")
def cert_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl program to make a certificate")
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def cert(cert_files: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """The certificate and key; the client trusts the certificate (REQUESTS_CA_BUNDLE) meanwhile."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", cert_files[0])
    yield cert_files

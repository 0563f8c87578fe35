"""Where the recorded vendor traffic and the vendor request schemas live: inside the checkout.

    from recorded import RECORDED, OPENAPI
    sorted((RECORDED / "chat").glob("*.json"))

Copied from the team's shared folder with their READMEs (provenance and licences), so a plain
clone has everything its tests read; no test reads outside the checkout.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDED = FIXTURES / "recorded"
OPENAPI = FIXTURES / "schemas" / "openai-openapi-requests.json"

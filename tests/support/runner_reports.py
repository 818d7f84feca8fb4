"""Shared by the runner tests: every tier report they produce must round-trip through the JSON Schema."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from runners.report import Report, json_schema


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(json_schema())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def round_trip(report: Report | Path) -> Report:
    """Validate the report's JSON against the schema, read it back, and check nothing was lost."""
    text = report.read_text() if isinstance(report, Path) else report.to_json()
    data: Any = json.loads(text)
    _validator().validate(data)
    again = Report.model_validate_json(text)
    assert again.to_json() == text
    return again

#!/usr/bin/env python3
"""Every key a command's JSON holds is named in its reference.

The golden outputs (tests/coordinator/golden/) hold every key the report and
info write for their jobs; each key must appear in the command's reference
document, inside a code span (`key`, or one of the names a span such as
`{rank, host, pid}` lists), or as `<key>_reason` beside a documented `<key>`.
Maps whose keys are data, not schema (counter names, event kinds, datasets),
are not walked: their names are listed in the references' own tables.

usage: test_json_reference.py GOLDEN_DIR DOCS_DIR
"""
import json
import re
import sys
from pathlib import Path

# The JSON each command writes, and the documents that name its keys.
REFERENCES = {
    "report": ["report.md", "report-reference.md", "report-stragglers.md"],
    "info": ["cli.md"],
}
# Objects keyed by data: their keys are not the schema's.
DATA_KEYED = {"counters", "events_by_kind", "rows_left_out"}


def schema_keys(value, found):
    if isinstance(value, dict):
        for key, inner in value.items():
            found.add(key)
            if key not in DATA_KEYED:
                schema_keys(inner, found)
    elif isinstance(value, list):
        for inner in value:
            schema_keys(inner, found)
    return found


def documented_names(text):
    names = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span))
    return names


def main():
    golden, docs = Path(sys.argv[1]), Path(sys.argv[2])
    failures = []
    for command, documents in REFERENCES.items():
        names = set()
        for document in documents:
            names |= documented_names((docs / document).read_text())
        outputs = sorted(golden.glob(f"*.{command}.json"))
        if not outputs:
            failures.append(f"{golden}: no golden output of {command}")
        keys = set()
        for output in outputs:
            schema_keys(json.loads(output.read_text()), keys)
        for key in sorted(keys):
            reason_of = key.removesuffix("_reason")
            if key in names or (key.endswith("_reason") and reason_of in names):
                continue
            failures.append(f"{command}: key '{key}' is not named in docs/{' or docs/'.join(documents)}")
    for failure in failures:
        print(failure)
    print(f"{len(failures)} keys undocumented")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

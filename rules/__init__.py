"""trajlab's built-in rule packs (YAML data). Installed as ``trajlab.rules``; see rules/README.md."""
